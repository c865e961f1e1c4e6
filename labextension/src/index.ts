/**
 * agentstack-lab for JupyterLab 4: the Agents side panel and the saved-tree renderer.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
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
  optional: [ILayoutRestorer, IRenderMimeRegistry],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null, rendermime: IRenderMimeRegistry | null) => {
    const panel = new AgentsPanel(rendermime);
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

export default plugin;
