/**
 * The Agents side panel: runs of every process in the workspace, a run's tree, and the pending
 * decisions with Approve / Reject / Edit / Answer, "Always allow code like this" and a dry run's report. State lives on the server (REST), so the panel
 * is whole again after a page reload; the WebSocket only says when to refresh.
 */
import { Notification } from '@jupyterlab/apputils';
import { CodeEditor, IEditorServices } from '@jupyterlab/codeeditor';
import { Widget } from '@lumino/widgets';

import { EventStream, IDecision, IDryRun, IInfo, IRun, ITreeNode, post, request } from './api';
import { IMarkdownHost, markdown, runNode, titleOf } from './runview';
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

function origin(o?: string | null, notebook?: string | null): string {
  if (!o) {
    return 'unknown origin';
  }
  if (o.startsWith('acp:')) {
    return `ACP · ${o.slice('acp:'.length)}`; // a run from an ACP host (jupyter-ai, Zed, ...): its name
  }
  if (notebook) {
    return notebook; // relative to the server's root, as the file browser shows it
  }
  return o.startsWith('notebook:') ? o.slice('notebook:'.length) : o;
}

/** When a run started: the time today, else the date and time (the full timestamp on hover). */
export function startedAt(iso: string, now: Date = new Date()): string {
  const t = new Date(iso);
  if (isNaN(t.getTime())) {
    return '';
  }
  const time = t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return t.toDateString() === now.toDateString()
    ? time
    : `${t.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

/** The runs list's status filter: its label and which statuses it keeps. */
const RUN_FILTERS: Record<string, { label: string; keep: (r: IRun) => boolean }> = {
  all: { label: 'All runs', keep: () => true },
  going: { label: 'Going', keep: r => !TERMINAL.includes(r.status) },
  waiting: { label: 'Waiting for you', keep: r => (r.waitingForYou || 0) > 0 },
  ended: { label: 'Ended', keep: r => TERMINAL.includes(r.status) },
  failed: { label: 'Failed or stopped', keep: r => r.status === 'failed' || r.status === 'stopped' }
};

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
  // --- issue 27 items 12-15: toasts, code editors, run controls, the workspace -----------------------
  /** JupyterLab's editor services (CodeMirror): highlighted code and a real editor for Edit. */
  editorServices: IEditorServices | null = null;
  /** Opens a notebook (root-relative path) and scrolls to a cell; set by the plugin. */
  openCell: ((path: string, cellId: string | null) => Promise<void>) | null = null;
  private info: IInfo | null = null;
  private toasts = new Map<string, string>(); // decision id -> its "An agent needs you" toast
  private codeViews = new Map<string, { host: HTMLElement; editor: CodeEditor.IEditor }>();
  private filter = 'all';
  private search = '';
  private searchBox: HTMLInputElement | null = null;
  private commenting = new Set<string>(); // runs whose comment box is open

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
      if (!this.info) {
        this.info = await request<IInfo>('info');
      }
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
        const toast = Notification.warning(`An agent needs you (${d.kind}): ${titleOf(d.prompt, 120)}`, {
          autoClose: false,
          actions: [{ label: 'Show', callback: () => {
            this.closeToast(d.id); // the card is what the person looks at now
            this.reveal(d.runId);
          } }]
        });
        this.toasts.set(d.id, toast);
      }
      seen.add(d.id);
    }
    this.seenDecisions = seen;
    this.closeStaleToasts();
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

  /** A decision's toast goes once it is no longer pending (answered from any surface) or its run ended. */
  private closeStaleToasts(): void {
    const pending = new Set(this.decisions.map(d => d.id));
    for (const id of [...this.toasts.keys()]) {
      if (!pending.has(id)) {
        this.closeToast(id);
      }
    }
    for (const d of this.decisions) {
      const run = this.runs.find(r => r.id === d.runId);
      if (run && TERMINAL.includes(run.status)) {
        this.closeToast(d.id);
      }
    }
  }

  private closeToast(decisionId: string): void {
    const toast = this.toasts.get(decisionId);
    if (toast !== undefined) {
      Notification.dismiss(toast);
      this.toasts.delete(decisionId);
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

  /** "researcher wants to run 3 lines of Python in your live kernel: ..." — the in-cell card's heading. */
  private approvalHeading(d: IDecision, code: string): HTMLElement {
    const lines = code.split('\n').length - (code.endsWith('\n') ? 1 : 0) || 1;
    const tool = typeof d.options?.tool === 'string' ? d.options.tool : 'python';
    const what = `${lines} line${lines === 1 ? '' : 's'} of ${tool === 'python' ? 'Python' : `code (tool ${tool})`}`;
    const where = d.executor === 'live'
      ? [' in ', h('b', {}, 'your live kernel'), ': it can read and change your variables']
      : d.executor === 'subprocess'
        ? [' in ', h('b', {}, 'an isolated subprocess'), ': your variables are not touched']
        : d.executor ? [` with the ${d.executor} executor`] : [];
    return h('div', { class: 'agentstack-decision-what', 'data-lines': lines },
      h('b', {}, d.agentType || 'The agent'), ` wants to run ${what}`, ...where);
  }

  /** The code, highlighted by JupyterLab's own CodeMirror (read-only), or editable for Edit; kept across redraws. */
  private codeView(d: IDecision, editable: boolean): HTMLElement {
    const key = `${d.id}:${editable ? 'edit' : 'view'}`;
    const kept = this.codeViews.get(key);
    if (kept) {
      return kept.host;
    }
    const host = h('div', { class: editable ? 'agentstack-code-edit' : 'agentstack-code-view' });
    const services = this.editorServices;
    if (!services) { // no editor services (a stripped-down lab): plain text, still editable
      const plain = editable
        ? h('textarea', { class: 'agentstack-code-plain', rows: 10 }) as HTMLTextAreaElement
        : h('pre', { class: 'agentstack-code' }, d.code || '');
      if (editable) {
        (plain as HTMLTextAreaElement).value = d.code || '';
      }
      host.append(plain);
      return host;
    }
    const model = new CodeEditor.Model({ mimeType: 'text/x-ipython' });
    model.sharedModel.setSource(d.code || '');
    const editor = services.factoryService.newInlineEditor({
      host, model,
      config: { readOnly: !editable, editable, lineNumbers: editable, lineWrap: true, autoClosingBrackets: true }
    });
    this.codeViews.set(key, { host, editor });
    return host;
  }

  /** The code the person approves: the editor's text when they edited it. */
  private editedCode(d: IDecision): string | null {
    const kept = this.codeViews.get(`${d.id}:edit`);
    if (kept) {
      return kept.editor.model.sharedModel.getSource();
    }
    const plain = this.node.querySelector(`[data-decision="${d.id}"] textarea.agentstack-code-plain`) as
      HTMLTextAreaElement | null;
    return plain ? plain.value : null;
  }

  /** Editors of decisions no longer pending are disposed. */
  private pruneCodeViews(): void {
    const pending = new Set(this.decisions.map(d => d.id));
    for (const [key, view] of [...this.codeViews]) {
      const [id, mode] = key.split(':');
      if (!pending.has(id) || (mode === 'edit' && !this.editing.has(id))) {
        view.editor.dispose();
        view.editor.model.dispose();
        this.codeViews.delete(key);
      }
    }
  }

  private decisionCard(d: IDecision): HTMLElement {
    const card = h('div', { class: 'agentstack-decision', 'data-decision': d.id });
    const run = this.runs.find(r => r.id === d.runId);
    const runPrompt = d.runPrompt || run?.prompt || '';
    card.append(
      h('div', { class: 'agentstack-decision-head' }, badge('waiting_user'), ' ',
        h('b', {}, d.kind), run ? ` · ${origin(run.origin, run.notebook)}` : ''),
      runPrompt ? h('div', { class: 'agentstack-decision-run agentstack-muted', title: runPrompt },
        'Run: ', `“${titleOf(runPrompt, 200)}”`) : ''
    );
    const code = d.code;
    const isApproval = d.kind === 'approval' || d.kind === 'consensus';
    if (isApproval && code !== null && code !== undefined) {
      card.append(this.approvalHeading(d, code));
      if (!/^Run this Python code\?$/.test(d.prompt.trim())) { // the engine's default says nothing more
        card.append(this.decisionPrompt(d.prompt));
      }
    } else {
      card.append(this.decisionPrompt(d.prompt));
    }
    if (isApproval) {
      const editing = this.editing.has(d.id);
      if (code !== null && code !== undefined) {
        card.append(this.codeView(d, editing));
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
          const edited = editing ? this.editedCode(d) : null;
          void this.act(d, 'approve', edited !== null && edited !== d.code ? { code: edited } : {});
        } }, editing ? 'Approve edited code' : 'Approve'),
        h('button', { class: 'jp-mod-styled jp-mod-warn agentstack-reject',
          onclick: () => void this.act(d, 'reject', {}) }, 'Reject'),
        d.code && !editing
          ? h('button', { class: 'jp-mod-styled agentstack-edit', onclick: () => {
            this.editing.add(d.id);
            this.render();
            this.codeViews.get(`${d.id}:edit`)?.editor.focus();
          } }, 'Edit')
          : null,
        d.code && editing
          ? h('button', { class: 'jp-mod-styled agentstack-edit-cancel', onclick: () => {
            this.editing.delete(d.id);
            this.render();
          } }, 'Cancel edit')
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

  /** Which workspace this panel serves: the folder (relative to the server's root) and its database. */
  private workspaceLine(): HTMLElement | null {
    const info = this.info;
    if (!info) {
      return null;
    }
    const rootName = (info.root || '').split(/[\\/]/).filter(Boolean).pop() || info.root || '';
    const where = info.workspace === '.' ? `${rootName} (the server's root folder)` : info.workspace;
    return h('div', { class: 'agentstack-workspace agentstack-muted', title: `database: ${info.database}` +
      (info.root ? `\nserver root: ${info.root}` : '') }, 'Workspace: ', h('b', {}, where));
  }

  /** Stop, Pause/Resume, Comment on a run of any process (the CLI's and the notebook's path). */
  private async runAction(r: IRun, action: string, body: Record<string, unknown> = {}): Promise<boolean> {
    try {
      await post(`runs/${r.id}/${action}`, body);
      return true;
    } catch (err) {
      Notification.error(`${action}: ${(err as Error).message}`, { autoClose: 8000 });
      return false;
    } finally {
      clearTimeout(this.timer);
      this.timer = window.setTimeout(() => void this.refresh(), 300); // the run applies it within its poll
    }
  }

  private runControls(r: IRun): HTMLElement | null {
    if (TERMINAL.includes(r.status)) {
      return null;
    }
    const button = (cls: string, label: string, title: string, onclick: () => void): HTMLElement =>
      h('button', { class: `jp-mod-styled agentstack-run-${cls}`, title, onclick: (ev: Event) => {
        ev.stopPropagation(); // not a click on the row (which selects the run)
        onclick();
      } }, label);
    const row = h('div', { class: 'agentstack-actions agentstack-run-controls' },
      button('stop', 'Stop', 'stop the run and all its agents', () => void this.runAction(r, 'stop')),
      r.status === 'paused' || r.paused
        ? button('resume', 'Resume', 'resume the paused run', () => void this.runAction(r, 'resume'))
        : button('pause', 'Pause', 'pause before its next step or tool call', () => void this.runAction(r, 'pause')),
      this.commenting.has(r.id) ? null : button('comment', 'Comment…', 'a comment the agent reads in its next model call',
        () => {
          this.commenting.add(r.id);
          this.render();
          (this.node.querySelector(`[data-run="${r.id}"] textarea.agentstack-comment`) as HTMLElement | null)?.focus();
        }));
    if (!this.commenting.has(r.id)) {
      return row;
    }
    const text = h('textarea', { class: 'agentstack-comment', rows: 2,
      placeholder: 'a comment for the agent' }) as HTMLTextAreaElement;
    text.addEventListener('click', ev => ev.stopPropagation());
    const send = async (): Promise<void> => {
      if (text.value.trim() && await this.runAction(r, 'comment', { text: text.value })) {
        this.commenting.delete(r.id);
        text.blur();
        this.render();
      }
    };
    return h('div', {}, row, text, h('div', { class: 'agentstack-actions' },
      button('comment-send', 'Send comment', 'send it to the run', () => void send()),
      button('comment-cancel', 'Cancel', 'close without sending', () => {
        this.commenting.delete(r.id);
        text.blur();
        this.render();
      })));
  }

  /** The status filter and the search box (kept across redraws, so typing keeps its focus). */
  private filterBar(): HTMLElement {
    const select = h('select', { class: 'jp-mod-styled agentstack-filter', 'aria-label': 'show runs' }) as HTMLSelectElement;
    for (const [key, f] of Object.entries(RUN_FILTERS)) {
      select.append(h('option', { value: key, selected: key === this.filter }, f.label));
    }
    select.addEventListener('change', () => {
      this.filter = select.value;
      this.render();
    });
    if (!this.searchBox) {
      const box = this.searchBox = h('input', { class: 'jp-mod-styled agentstack-search', type: 'search',
        placeholder: 'search prompts, notebooks, ids', 'aria-label': 'search runs' }) as HTMLInputElement;
      box.addEventListener('input', () => {
        this.search = box.value;
        this.render();
      });
    }
    return h('div', { class: 'agentstack-filter-bar' }, select, this.searchBox);
  }

  private shownRuns(): IRun[] {
    const keep = (RUN_FILTERS[this.filter] || RUN_FILTERS.all).keep;
    const words = this.search.toLowerCase().split(/\s+/).filter(Boolean);
    return this.runs.filter(r => keep(r) && words.every(w =>
      [r.prompt, r.id, r.status, origin(r.origin, r.notebook)].some(f => (f || '').toLowerCase().includes(w))));
  }

  /** Where the run came from: a notebook (a link that opens it at the cell) or the origin's name. */
  private originView(r: IRun): Node {
    const text = origin(r.origin, r.notebook);
    if (!r.notebook || !this.openCell) {
      return document.createTextNode(text);
    }
    const path = r.notebook;
    return h('a', { class: 'agentstack-open-cell', href: '#', title: r.cellId
      ? `open ${path} at the cell that started this run` : `open ${path}`, onclick: (ev: Event) => {
      ev.preventDefault();
      ev.stopPropagation();
      void this.openCell?.(path, r.cellId || null).catch(err =>
        Notification.error(`could not open ${path}: ${(err as Error).message}`, { autoClose: 8000 }));
    } }, text + (r.cellId ? ' ↗ cell' : ' ↗'));
  }

  /** A question or approval text as the model wrote it: Markdown rendered when the panel has a renderer. */
  private decisionPrompt(text: string): HTMLElement {
    const box = h('div', { class: 'agentstack-decision-prompt' });
    box.append(this.markdown ? markdown(this.markdown, text) : document.createTextNode(text));
    return box;
  }

  private runRow(r: IRun): HTMLElement {
    const waiting = r.waitingForYou || 0;
    return h('div', { class: `agentstack-run${r.id === this.selected ? ' selected' : ''}`, 'data-run': r.id,
      onclick: (ev: Event) => {
        if (!(ev.target as HTMLElement).closest('textarea, button, a')) {
          this.showRun(r.id);
        }
      } },
      h('div', {}, badge(r.status), ' ', h('span', { class: 'agentstack-run-prompt' }, titleOf(r.prompt, 80))),
      r.continues ? h('div', { class: 'agentstack-muted agentstack-follow-up' },
        `↪ follow-up to “${r.continuesPrompt ? titleOf(r.continuesPrompt, 80) : 'an earlier run'}”`) : null,
      h('div', { class: 'agentstack-muted agentstack-run-meta' },
        this.originView(r), ' · ',
        h('span', { class: 'agentstack-started', title: r.createdAt }, `started ${startedAt(r.createdAt)}`),
        ` · ${elapsed(r)} · ${r.tokens || 0} tokens${r.cost?.text ? ` · cost ${r.cost.text}` : ''} · ${r.agents || 0} agents`,
        waiting ? h('span', { class: 'agentstack-badge s-waiting_user agentstack-waiting' }, ` ${waiting} waiting for you`) : null),
      this.runControls(r));
  }

  render(): void {
    const node = this.node;
    const active = document.activeElement;
    if (active && node.contains(active) && (active.tagName === 'TEXTAREA' || active.closest('.agentstack-code-edit'))) {
      return; // do not wipe what someone is typing; the next refresh after they act redraws
    }
    const searching = active === this.searchBox && this.searchBox !== null;
    const caret = searching ? [this.searchBox!.selectionStart, this.searchBox!.selectionEnd] : null;
    this.pruneCodeViews();
    node.replaceChildren();
    node.append(h('h2', { class: 'agentstack-title' }, 'Agents'));
    const ws = this.workspaceLine();
    if (ws) {
      node.append(ws);
    }
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
    node.append(h('h3', {}, 'Runs'), this.filterBar());
    const table = h('div', { class: 'agentstack-runs' });
    const shown = this.shownRuns();
    for (const r of shown) {
      table.append(this.runRow(r));
    }
    if (!this.runs.length) {
      table.append(h('div', { class: 'agentstack-muted' }, 'No runs in this workspace yet.'));
    } else if (!shown.length) {
      table.append(h('div', { class: 'agentstack-muted agentstack-none-shown' },
        `None of the ${this.runs.length} runs match.`));
    }
    node.append(table);
    if (searching && caret) {
      this.searchBox!.focus();
      this.searchBox!.setSelectionRange(caret[0], caret[1]);
    }
  }
}
