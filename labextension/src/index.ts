/**
 * agentstack-lab for JupyterLab 4: the Agents side panel and the saved-tree renderer.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IEditorServices } from '@jupyterlab/codeeditor';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';

import { AgentsPanel } from './panel';
import { SNAPSHOT_MIME, SnapshotRenderer } from './snapshot';
import { TERMINAL } from './vocabulary';

const agentsIcon = new LabIcon({
  name: 'agentstack-lab:agents',
  svgstr: '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<circle cx="12" cy="5" r="3"/><circle cx="5" cy="18" r="3"/><circle cx="19" cy="18" r="3"/>' +
    '<path d="M11 8h2v4h5v3h-2v-1H8v1H6v-3h5z"/></g></svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agentstack-lab:plugin',
  description: 'Agents panel: runs of every process, their trees and the decisions waiting for you.',
  autoStart: true,
  optional: [ILayoutRestorer, IRenderMimeRegistry, IEditorServices],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null, rendermime: IRenderMimeRegistry | null,
             editorServices: IEditorServices | null) => {
    const panel = new AgentsPanel(rendermime);
    panel.editorServices = editorServices;
    panel.openCell = (path, cellId) => openAtCell(app, path, cellId);
    panel.title.icon = agentsIcon;
    panel.onReveal = () => app.shell.activateById(panel.id);
    app.shell.add(panel, 'left', { rank: 600 });
    restorer?.add(panel, 'agentstack-agents');
    app.commands.addCommand('agentstack:show-run', {
      label: 'Show Agent Run',
      execute: args => {
        panel.showRun(String(args.runId));
        app.shell.activateById(panel.id);
      }
    });
    if (rendermime) {
      const waiting = new Map<string, Array<() => void>>();
      panel.runEnded.add(runId => {
        (waiting.get(runId) || []).forEach(cb => cb());
        waiting.delete(runId);
      });
      const onRunEnd = (runId: string, cb: () => void) => {
        if (TERMINAL.includes(panel.statusOf(runId) || '')) {
          cb(); // it ended before this output was drawn
          return;
        }
        waiting.set(runId, [...(waiting.get(runId) || []), cb]);
        // the next refresh reports it, even when it ended before this page saw it run
        window.setTimeout(() => void panel.refresh(), 100);
      };
      const findRegistry = (node: HTMLElement): IRenderMimeRegistry | null => {
        for (const w of app.shell.widgets('main')) {
          const registry = (w as any).content?.rendermime as IRenderMimeRegistry | undefined;
          if (registry && w.node.contains(node)) {
            return registry;
          }
        }
        return rendermime;
      };
      rendermime.addFactory({
        safe: true,
        mimeTypes: [SNAPSHOT_MIME],
        defaultRank: -20, // before the widget view (-10): it shows the widget itself while the model lives
        createRenderer: options => new SnapshotRenderer(options, findRegistry, onRunEnd)
      }, -20);
    }
    (window as any).agentstackPanel = panel;
  }
};

/** Open a notebook (a path relative to the server's root) and scroll to the cell with id `cellId`. */
async function openAtCell(app: JupyterFrontEnd, path: string, cellId: string | null): Promise<void> {
  const widget: any = await app.commands.execute('docmanager:open', { path });
  if (!widget) {
    throw new Error(`JupyterLab could not open ${path}`);
  }
  app.shell.activateById(widget.id);
  await widget.context?.ready;
  await widget.revealed;
  const notebook = widget.content;
  if (!cellId || !notebook?.widgets) {
    return;
  }
  const index = notebook.widgets.findIndex((c: any) => c.model?.id === cellId);
  if (index < 0) {
    throw new Error(`the cell that started this run is no longer in ${path}`);
  }
  notebook.activeCellIndex = index;
  // a just-opened notebook lays its cells out over a few frames: scroll until the cell is in view
  const inView = (): boolean => {
    const cell = notebook.widgets[index]?.node as HTMLElement | undefined;
    if (!cell || !cell.isConnected) {
      return false;
    }
    const r = cell.getBoundingClientRect(), v = notebook.node.getBoundingClientRect();
    return r.height > 0 && r.top < v.bottom && r.bottom > v.top;
  };
  for (let i = 0; i < 40 && !inView(); i++) {
    if (typeof notebook.scrollToItem === 'function') {
      await notebook.scrollToItem(index, 'auto', 'center');
    }
    if (!inView()) {
      notebook.widgets[index]?.node.scrollIntoView({ block: 'center' });
    }
    await new Promise(resolve => setTimeout(resolve, 50));
  }
}

export default plugin;
