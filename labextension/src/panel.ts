/**
 * The Agents side panel: runs of every process in the workspace, a run's tree, and the pending
 * decisions with Approve / Reject / Edit / Answer, "Always allow code like this" and a dry run's report. State lives on the server (REST), so the panel
 * is whole again after a page reload; the WebSocket only says when to refresh.
 */
import { Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { EventStream, IDecision, IDryRun, IRun, ITreeNode, post, request } from './api';
import { IMarkdownHost, runNode, titleOf } from './runview';
import { STATUS_LABELS, TERMINAL } from './vocabulary';


type Child = Node | string | null | undefined | false;

export function h(tag: string, attrs: Record<string, any> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'onclick') {
      el.addEventListener('click', v);
    } else if (k === 'class') {
      el.className = v;
    } else if (v !== undefined && v !== null && v !== false) {
      el.setAttribute(k, String(v));
    }
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) {
      el.append(c);
    }
  }
  return el;
}

export function badge(status: string): HTMLElement {
  return h('span', { class: `agentstack-badge s-${status}` }, STATUS_LABELS[status] || status);
}

function elapsed(run: IRun): string {
  const start = Date.parse(run.createdAt);
  const end = run.endedAt ? Date.parse(run.endedAt) : Date.now();
  if (isNaN(start)) {
    return '';
  }
  const s = Math.max(0, Math.round((end - start) / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${s % 60}s`;
}

/** A dry run's report: clean or not, the names it would change, its output, what the sandbox refused. */
export function dryRunView(dry: IDryRun): HTMLElement {
  const box = h('div', { class: `agentstack-dry-run ${dry.clean ? 'clean' : 'unclean'}` },
    h('div', { class: 'agentstack-dry-run-head' },
      h('b', {}, 'Dry run in a sandboxed fork of the kernel: '),
      dry.clean ? 'clean' : `not clean (${dry.ended}${dry.error ? ', error' : ''}${dry.refused?.length ? ', refused calls' : ''})`));
  const list = (title: string, items: string[]): void => {
    if (items.length) {
      box.append(h('div', { class: 'agentstack-muted' }, title), h('ul', {}, ...items.map(i => h('li', {}, i))));
    }
  };
  list('Names', (dry.changes ?? []).map(c => `${c.action} ${c.name}: ${c.before ? `${c.before} → ` : ''}${c.after}`));
  if (dry.stdout) {
    box.append(h('div', { class: 'agentstack-muted' }, 'Output'), h('pre', { class: 'agentstack-code' }, dry.stdout));
  }
  if (dry.error) {
    box.append(h('div', { class: 'agentstack-muted' }, 'Error'), h('pre', { class: 'agentstack-error' }, dry.error));
  }
  list('Refused by the sandbox', (dry.refused ?? []).map(r => `${r.call} ${r.target ?? ''}`.trim()));
  list('Protections', Object.entries(dry.protections ?? {}).map(([k, v]) => `${k}: ${v}`));
  return box;
}

function origin(o?: string | null): string {
  if (!o) {
    return 'unknown origin';
  }
  if (o.startsWith('acp:')) {
    return `ACP · ${o.slice('acp:'.length)}`; // a run from an ACP host (jupyter-ai, Zed, ...): its name
  }
  return o.startsWith('notebook:') ? o.slice('notebook:'.length) : o;
}

export class AgentsPanel extends Widget {
  private runs: IRun[] = [];
  private decisions: IDecision[] = [];
  private selected: string | null = null;
  private tree: ITreeNode | null = null;
  private seenDecisions: Set<string> | null = null;
  private lastStatus = new Map<string, string>();
  private stream: EventStream;
  private timer = 0;
  private ticker: any;
  private editing = new Set<string>();
  private always = new Set<string>(); // approvals whose "Always allow code like this" preview is open
  readonly runEnded = new Set<(runId: string) => void>();
  error = '';

  constructor(private markdown: IMarkdownHost | null = null) {
    super();
    this.id = 'agentstack-agents';
    this.addClass('agentstack-panel');
    this.title.caption = 'Agents';
    this.stream = new EventStream(msg => this.onEvent(msg));
    this.stream.connect();
    void this.refresh();
    this.ticker = setInterval(() => void this.refresh(), 5000);
  }

  dispose(): void {
    this.stream.dispose();
    clearInterval(this.ticker);
    super.dispose();
  }

  /** The last status this panel saw for a run (undefined before it saw the run). */
  statusOf(runId: string): string | undefined {
    return this.lastStatus.get(runId);
  }

  /** Show one run (its tree and its decisions), e.g. from a toast's "Show". */
  showRun(runId: string): void {
    this.selected = runId;
    void this.refresh();
  }

  private onEvent(msg: any): void {
    if (msg.type === 'agent-completed' || msg.type === 'error' || msg.type === 'user-query' ||
        msg.type === 'agent-state') {
      clearTimeout(this.timer);
      this.timer = window.setTimeout(() => void this.refresh(), 150);
    }
  }

  async refresh(): Promise<void> {
    try {
      const [runs, decisions] = await Promise.all([
        request<{ runs: IRun[] }>('runs?limit=50'),
        request<{ decisions: IDecision[] }>('decisions?state=pending')
      ]);
      this.runs = runs.runs;
      this.decisions = decisions.decisions;
      this.tree = this.selected
        ? (await request<{ tree: ITreeNode }>(`runs/${this.selected}`)).tree
        : null;
      this.error = '';
      this.notify();
    } catch (err) {
      this.error = `could not reach the agentstack server extension: ${(err as Error).message}`;
    }
    this.render();
  }

  private notify(): void {
    const first = this.seenDecisions === null;
    const seen = this.seenDecisions ?? new Set<string>();
    for (const d of this.decisions) {
      if (!seen.has(d.id) && !first) {
        Notification.warning(`An agent needs you (${d.kind}): ${titleOf(d.prompt, 120)}`, {
          autoClose: false,
          actions: [{ label: 'Show', callback: () => this.reveal(d.runId) }]
        });
      }
      seen.add(d.id);
    }
    this.seenDecisions = seen;
    for (const r of this.runs) {
      const before = this.lastStatus.get(r.id);
      if (before !== undefined && !TERMINAL.includes(before) && TERMINAL.includes(r.status)) {
        const say = r.status === 'completed' ? Notification.success : Notification.error;
        say(`Agent run ${r.status}: ${titleOf(r.prompt, 100)}`, {
          autoClose: 8000,
          actions: [{ label: 'Show', callback: () => this.reveal(r.id) }]
        });
      }
      if ((before === undefined || !TERMINAL.includes(before)) && TERMINAL.includes(r.status)) {
        this.runEnded.forEach(cb => cb(r.id)); // renderers waiting for this run's final tree
      }
      this.lastStatus.set(r.id, r.status);
    }
  }

  onReveal: ((runId: string | null) => void) | null = null;

  private reveal(runId: string | null): void {
    if (runId) {
      this.showRun(runId);
    }
    this.onReveal?.(runId);
  }

  private async act(d: IDecision, action: string, body: Record<string, unknown>): Promise<void> {
    try {
      await post(`decisions/${d.id}/${action}`, body);
      this.editing.delete(d.id);
      this.always.delete(d.id);
    } catch (err) {
      Notification.error((err as Error).message);
    }
    await this.refresh();
  }

  private decisionCard(d: IDecision): HTMLElement {
    const card = h('div', { class: 'agentstack-decision', 'data-decision': d.id });
    const run = this.runs.find(r => r.id === d.runId);
    card.append(
      h('div', { class: 'agentstack-decision-head' }, badge('waiting_user'), ' ',
        h('b', {}, d.kind), run ? ` · ${origin(run.origin)}` : ''),
      h('div', { class: 'agentstack-decision-prompt' }, d.prompt)
    );
    if (d.kind === 'approval' || d.kind === 'consensus') {
      const editing = this.editing.has(d.id);
      let editor: HTMLTextAreaElement | null = null;
      if (d.code !== null && d.code !== undefined) {
        if (editing) {
          editor = h('textarea', { class: 'agentstack-code-edit', rows: 8 }) as HTMLTextAreaElement;
          editor.value = d.code;
          card.append(editor);
        } else {
          card.append(h('pre', { class: 'agentstack-code' }, d.code));
        }
      }
      if (d.options?.dryRun) {
        card.append(dryRunView(d.options.dryRun));
      }
      const rule = d.alwaysRule;
      if (rule && rule.description && this.always.has(d.id)) {
        card.append(h('div', { class: 'agentstack-always' },
          h('div', {}, 'Approve this call and save a rule that will ', h('b', {}, rule.description), '. ',
            h('span', { class: 'agentstack-muted' }, 'It never lifts a built-in deny.')),
          h('div', { class: 'agentstack-actions' },
            h('button', { class: 'jp-mod-styled jp-mod-accept agentstack-always-session',
              onclick: () => void this.act(d, 'approve', { always: 'session' }) }, 'For this session'),
            h('button', { class: 'jp-mod-styled jp-mod-accept agentstack-always-workspace',
              onclick: () => void this.act(d, 'approve', { always: 'workspace' }) }, 'For the whole workspace'),
            h('button', { class: 'jp-mod-styled agentstack-always-cancel', onclick: () => {
              this.always.delete(d.id);
              this.render();
            } }, 'Cancel'))));
      }
      card.append(h('div', { class: 'agentstack-actions' },
        rule && rule.description && !this.always.has(d.id) && !editing
          ? h('button', { class: 'jp-mod-styled agentstack-always-open', title: rule.description, onclick: () => {
            this.always.add(d.id);
            this.render();
          } }, 'Always allow code like this…')
          : null,
        h('button', { class: 'jp-mod-styled jp-mod-accept agentstack-approve', onclick: () => {
          const code = editor && editor.value !== d.code ? { code: editor.value } : {};
          void this.act(d, 'approve', code);
        } }, 'Approve'),
        h('button', { class: 'jp-mod-styled jp-mod-warn agentstack-reject',
          onclick: () => void this.act(d, 'reject', {}) }, 'Reject'),
        d.code && !editing
          ? h('button', { class: 'jp-mod-styled agentstack-edit', onclick: () => {
            this.editing.add(d.id);
            this.render();
          } }, 'Edit')
          : null));
    } else {
      const answer = h('textarea', { class: 'agentstack-answer', rows: 2, placeholder: 'your answer' }) as HTMLTextAreaElement;
      const row = h('div', { class: 'agentstack-actions' },
        h('button', { class: 'jp-mod-styled jp-mod-accept agentstack-send', onclick: () => {
          if (answer.value.trim()) {
            void this.act(d, 'answer', { response: answer.value });
          }
        } }, 'Answer'));
      for (const choice of d.options?.choices ?? []) {
        row.append(h('button', { class: 'jp-mod-styled', onclick: () => void this.act(d, 'answer', { response: choice }) },
          String(choice)));
      }
      card.append(answer, row);
    }
    return card;
  }

  private treeNode(n: ITreeNode): HTMLElement {
    if (this.markdown) {
      return runNode(n as any, this.markdown); // the run as the notebook's tree draws it, Markdown rendered
    }
    return h('div', { class: `agentstack-tree-node s-${n.status}` },
      h('div', {}, badge(n.status), ' ', h('b', {}, n.type), ' ', titleOf(n.prompt, 300),
        n.cost?.text ? h('span', { class: 'agentstack-muted agentstack-cost' }, ` · cost ${n.cost.text}`) : null),
      n.result ? h('div', { class: 'agentstack-result' }, n.result.slice(0, 2000)) : null,
      n.error ? h('div', { class: 'agentstack-error' }, n.error.slice(0, 500)) : null,
      ...(n.children || []).map(c => this.treeNode(c)));
  }

  render(): void {
    const node = this.node;
    const active = document.activeElement;
    if (active && node.contains(active) && active.tagName === 'TEXTAREA') {
      return; // do not wipe what someone is typing; the next refresh after they act redraws
    }
    node.replaceChildren();
    node.append(h('h2', { class: 'agentstack-title' }, 'Agents'));
    if (this.error) {
      node.append(h('div', { class: 'agentstack-error' }, this.error));
    }
    // every pending decision of the workspace, whichever run is selected: the selected run's first
    const pending = [...this.decisions.filter(d => d.runId === this.selected),
      ...this.decisions.filter(d => d.runId !== this.selected)];
    node.append(h('h3', {}, `Waiting for you (${pending.length})`));
    const list = h('div', { class: 'agentstack-decisions' });
    pending.forEach(d => list.append(this.decisionCard(d)));
    if (!pending.length) {
      list.append(h('div', { class: 'agentstack-muted' }, 'Nothing is waiting for you.'));
    }
    node.append(list);
    if (this.selected && this.tree) {
      node.append(h('h3', {}, 'Run ', h('button', { class: 'jp-mod-styled agentstack-back', onclick: () => {
        this.selected = null;
        this.tree = null;
        this.render();
      } }, 'All runs')), h('div', { class: 'agentstack-tree-view' }, this.treeNode(this.tree)));
    }
    node.append(h('h3', {}, 'Runs'));
    const table = h('div', { class: 'agentstack-runs' });
    for (const r of this.runs) {
      const waiting = r.waitingForYou || 0;
      table.append(h('div', { class: `agentstack-run${r.id === this.selected ? ' selected' : ''}`, 'data-run': r.id,
        onclick: () => this.showRun(r.id) },
        h('div', {}, badge(r.status), ' ', h('span', { class: 'agentstack-run-prompt' }, titleOf(r.prompt, 80))),
        r.continues ? h('div', { class: 'agentstack-muted agentstack-follow-up' },
          `↪ follow-up to “${r.continuesPrompt ? titleOf(r.continuesPrompt, 80) : 'an earlier run'}”`) : null,
        h('div', { class: 'agentstack-muted agentstack-run-meta' },
          `${origin(r.origin)} · ${elapsed(r)} · ${r.tokens || 0} tokens${r.cost?.text ? ` · cost ${r.cost.text}` : ''}`
          + ` · ${r.agents || 0} agents`,
          waiting ? h('span', { class: 'agentstack-badge s-waiting_user agentstack-waiting' }, ` ${waiting} waiting for you`) : null)));
    }
    if (!this.runs.length) {
      table.append(h('div', { class: 'agentstack-muted' }, 'No runs in this workspace yet.'));
    }
    node.append(table);
  }
}
