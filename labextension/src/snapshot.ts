/**
 * Renders application/vnd.agentstack.tree+json, the static tree every %agent output carries.
 *
 * Ranked before the widget view, it shows the live widget while its model exists (a running
 * kernel) and the saved snapshot otherwise, so a reopened notebook never says "model not found".
 * A snapshot written while the run was still going is replaced by the final tree when the run
 * ends (the run's tree from the server, written into the output model so the notebook saves it).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { PanelLayout, Widget } from '@lumino/widgets';

import { ITreeNode, request } from './api';
import { h } from './panel';
import { IRunNode, runNode } from './runview';
import { TERMINAL } from './vocabulary';

export const SNAPSHOT_MIME = 'application/vnd.agentstack.tree+json';
const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

interface ISnapNode extends IRunNode {
  children?: ISnapNode[];
}

interface ISnapshot {
  version: number;
  runId: string | null;
  final: boolean;
  roots: ISnapNode[];
}

function cut(s: string | null | undefined, n: number): string | null {
  if (!s) {
    return null;
  }
  return s.length <= n ? s : `${s.slice(0, n)}… (${s.length - n} more characters)`;
}

/** The server's tree (engine shape, with each agent's tool calls) → the snapshot shape the kernel writes. */
export function fromTree(t: ITreeNode): ISnapNode {
  const u = t.usage || {};
  const any = t as any;
  return {
    id: t.id, type: t.type, status: t.status, prompt: cut(t.prompt, 2000), result: cut(t.result, 20000),
    error: cut(t.error, 4000),
    usage: { inputTokens: u.inputTokens || u.input_tokens || 0, outputTokens: u.outputTokens || u.output_tokens || 0,
      basis: u.basis },
    cost: t.cost,
    tools: (any.tools || []).slice(-40), answers: any.answers || any.metadata?.answers || [],
    children: (t.children || []).map(fromTree)
  };
}

export class SnapshotRenderer extends Widget implements IRenderMime.IRenderer {
  private staticView = new Widget();
  private live: IRenderMime.IRenderer | null = null;
  private observer: MutationObserver | null = null;
  private generation = 0;

  constructor(private options: IRenderMime.IRendererOptions,
              private findRegistry: (node: HTMLElement) => IRenderMimeRegistry | null,
              private onRunEnd: (runId: string, cb: () => void) => void) {
    super();
    this.addClass('agentstack-snapshot');
    this.layout = new PanelLayout();
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const snap = model.data[this.options.mimeType] as unknown as ISnapshot;
    const layout = this.layout as PanelLayout;
    // an updated output re-renders with this same renderer: start over
    const generation = ++this.generation; // a newer renderModel call wins over one still awaiting
    this.observer?.disconnect();
    this.live?.dispose();
    this.live = null;
    this.staticView.node.replaceChildren(
      h('div', { class: 'agentstack-snapshot-head agentstack-muted' },
        snap.final ? 'Agent run (saved tree)' : 'Agent run (tree as saved while it ran)'),
      ...snap.roots.map(r => runNode(r, this.options)));
    if (!layout.widgets.includes(this.staticView)) {
      layout.addWidget(this.staticView);
    }
    this.staticView.show();
    if (!snap.final && snap.runId) {
      this.onRunEnd(snap.runId, () => void this.finalise(model, snap.runId as string));
    }
    // the widget renderer lives in each notebook's own registry (one widget manager per kernel)
    const registry = model.data[WIDGET_MIME] ? await this.notebookRegistry() : null;
    if (registry && registry.getFactory(WIDGET_MIME) && generation === this.generation) {
      this.live = registry.createRenderer(WIDGET_MIME);
      layout.addWidget(this.live);
      this.staticView.hide();
      const judge = () => {
        const node = this.live?.node;
        if (!node) {
          return;
        }
        if (node.querySelector('.agentstack-tree')) {
          this.staticView.hide(); // the widget is live: it is the better view
          this.live?.show();
        } else if (/model not found|Error displaying widget/.test(node.textContent || '')) {
          this.observer?.disconnect(); // its model is gone for good: the saved tree replaces it
          this.live?.dispose();
          this.live = null;
          this.staticView.show();
        }
      };
      this.observer = new MutationObserver(judge);
      this.observer.observe(this.live.node, { childList: true, subtree: true, characterData: true });
      // no kernel, no widget manager answer: after a moment the saved tree is what there is
      setTimeout(() => {
        if (generation === this.generation && !this.live?.node.querySelector('.agentstack-tree')) {
          this.live?.hide();
          this.staticView.show();
        }
      }, 3000);
      await this.live.renderModel(model); // resolves only once a widget manager answers
      judge();
    }
  }

  private async notebookRegistry(): Promise<IRenderMimeRegistry | null> {
    for (let i = 0; i < 100 && !this.node.isConnected; i++) {
      await new Promise(resolve => setTimeout(resolve, 20));
    }
    return this.findRegistry(this.node);
  }

  private async finalise(model: IRenderMime.IMimeModel, runId: string): Promise<void> {
    try {
      const { tree } = await request<{ tree: ITreeNode }>(`runs/${runId}`);
      if (!TERMINAL.includes(tree.status)) {
        return;
      }
      const snap: ISnapshot = { version: 1, runId, final: true, roots: [fromTree(tree)] };
      const text = `${tree.type} ${tree.status}: ${tree.result || tree.error || ''}`;
      model.setData({ data: { ...model.data, [SNAPSHOT_MIME]: snap as any, 'text/plain': text } });
    } catch (err) {
      console.warn('agentstack-lab: could not fetch the final tree', err);
    }
  }

  dispose(): void {
    this.observer?.disconnect();
    super.dispose();
  }
}
