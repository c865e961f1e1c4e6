/**
 * A finished or saved run's tree as the live notebook tree draws it: one node per agent with its
 * header (code that raised flagged, status, type, the prompt as typed), the questions with their
 * answers, each tool call folded (the code that ran, edited marked, its output, its traceback trimmed
 * to the agent's own frames with the whole one a click away), and its result as Markdown rendered by
 * JupyterLab's own renderer (untrusted: sanitised). A finished subagent folds to its header line and
 * an excerpt of its result. Used by the saved-tree renderer and the Agents panel's run view.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { renderMarkdown } from '@jupyterlab/rendermime';

import { STATUS_LABELS, SURFACE_LABELS, TERMINAL } from './vocabulary';

type Child = Node | string | null | undefined | false;

function el(tag: string, cls: string, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  if (cls) {
    e.className = cls;
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) {
      e.append(c);
    }
  }
  return e;
}

/** One tool call (engine/transcript.py's record); an engine tree's short form has `error` only. */
export interface IToolRecord {
  tool: string;
  code?: string | null;
  original?: string | null;
  decision?: string | null;
  input?: string | null;
  output?: string | null;
  traceback?: string | null;
  error?: string | null;
  done?: boolean;
}

export interface IAnswer {
  kind?: string;
  question?: string | null;
  answer?: unknown;
  source?: string | null;
}

export interface IRunNode {
  id: string;
  type: string;
  status: string;
  prompt?: string | null;
  result?: string | null;
  error?: string | null;
  usage?: Record<string, any>;
  /** The cost in USD priced by the server (``text``: "$0.0123", "~$…", "≥ $…", "unknown"). */
  cost?: { text?: string } | null;
  tools?: (IToolRecord | string)[];
  answers?: IAnswer[];
  metadata?: { answers?: IAnswer[] } & Record<string, unknown>;
  children?: IRunNode[];
}

/** What renders Markdown: a rendermime registry, or a renderer's options (both carry these). */
export interface IMarkdownHost {
  sanitizer: IRenderMime.ISanitizer;
  resolver?: IRenderMime.IResolver | null;
  linkHandler?: IRenderMime.ILinkHandler | null;
  latexTypesetter?: IRenderMime.ILatexTypesetter | null;
  markdownParser?: IRenderMime.IMarkdownParser | null;
}

const KERNEL_VARIABLES = '\n\nKernel variables (';

/** The prompt as typed: `@df` again, without the kernel-variable descriptions %agent appends. */
export function typedPrompt(prompt: string | null | undefined): string {
  const text = prompt || '';
  const cut = text.lastIndexOf(KERNEL_VARIABLES);
  if (cut < 0) {
    return text;
  }
  let head = text.slice(0, cut);
  for (const m of text.slice(cut).matchAll(/^- `([A-Za-z_]\w*)`/gm)) {
    head = head.replace(new RegExp('(^|[^\\w@`])`' + m[1] + '`(?!`)', 'g'), `$1@${m[1]}`);
  }
  return head;
}

/** One line of plain text: first paragraph, no fences, backticks or `**`; cut text ends with an ellipsis. */
export function excerpt(text: string | null | undefined, limit = 80): string {
  const plain = (text || '').trim().replace(/^[ \t]*(`{3,}|~{3,})[^\n]*(\n|$)/gm, '')
    .replace(/\*\*|__|`/g, '').trim();
  const [first, ...rest] = plain.split('\n\n');
  const flat = first.split(/\s+/).filter(Boolean).join(' ');
  if (flat.length <= limit) {
    return flat + (rest.join('').trim() && flat ? ' …' : '');
  }
  return flat.slice(0, limit - 1).trimEnd() + '…';
}

/** A title for headers and toasts: the prompt as typed, as one plain line. */
export function titleOf(prompt: string | null | undefined, limit = 80): string {
  return excerpt(typedPrompt(prompt), limit);
}

const LIBRARY = ['/site-packages/', '/dist-packages/', '/lib/python3', '<frozen '];

/** The traceback with library frames left out (null when there are none to leave out). */
export function userFrames(tb: string): string | null {
  const lines = tb.split('\n');
  const out: string[] = [];
  let hidden = 0;
  let gap = 0;
  const flush = () => {
    if (gap) {
      out.push(`  … ${gap} library frame${gap > 1 ? 's' : ''}`);
      gap = 0;
    }
  };
  for (let i = 0; i < lines.length;) {
    const m = /^ {2}File "([^"]*)", line \d+/.exec(lines[i]);
    if (!m) {
      flush();
      out.push(lines[i]);
      i++;
      continue;
    }
    let end = i + 1;
    while (end < lines.length && lines[end].startsWith('    ')) {
      end++;
    }
    if (LIBRARY.some(mark => m[1].includes(mark))) {
      hidden++;
      gap++;
    } else {
      flush();
      out.push(...lines.slice(i, end));
    }
    i = end;
  }
  flush();
  return hidden ? out.join('\n') : null;
}

function codeBox(text: string): HTMLElement {
  return el('pre', 'agentstack-code-box', text);
}

function record(t: IToolRecord | string): IToolRecord {
  return typeof t === 'string' ? { tool: t, done: true } : { ...t, traceback: t.traceback ?? t.error ?? null };
}

function failedCount(n: IRunNode): number {
  return (n.tools || []).map(record).filter(t => t.tool === 'python' && t.done && t.traceback &&
    t.decision !== 'rejected').length;
}

function failedBelow(n: IRunNode): number {
  return (n.children || []).reduce((sum, c) => sum + failedCount(c) + failedBelow(c), 0);
}

function tokens(n: IRunNode): string {
  const u = n.usage || {};
  const total = (u.inputTokens || u.input_tokens || 0) + (u.outputTokens || u.output_tokens || 0);
  const scope = n.children && n.children.length ? 'subtree' : 'this agent';
  return u.basis === 'estimated' ? `~${total.toLocaleString()} tokens (estimated, ${scope})`
    : `${total.toLocaleString()} tokens (${scope})`;
}

function sourceLabel(source: string | null | undefined): string {
  if (!source || source === 'widget' || source === 'user' || source === 'notebook') {
    return 'by you';
  }
  return `from ${SURFACE_LABELS[source] || source}`;
}

function toolView(t: IToolRecord): HTMLElement {
  const mark = !t.done ? '…' : t.traceback ? '✗' : '✓';
  const title = t.decision === 'rejected' ? `${t.tool} · rejected`
    : `${t.tool} ${mark}${t.decision === 'edited' ? ' · edited' : ''}`;
  const box = el('details', 'agentstack-run-tool', el('summary', '', title));
  if (t.code) {
    box.append(el('b', '', t.decision === 'edited' ? 'code that ran (edited)' : 'code'), codeBox(t.code));
    if (t.decision === 'edited' && t.original) {
      box.append(el('details', '', el('summary', '', "the model's original"), codeBox(t.original)));
    }
  } else if (t.input) {
    box.append(el('b', '', 'input'), codeBox(t.input));
  }
  if (!t.done) {
    box.append(el('i', '', 'running…'));
  } else if (t.decision === 'rejected') {
    box.append(el('i', '', 'not run: rejected'));
  } else {
    if (t.output || !t.traceback) {
      box.append(el('b', '', 'output'), codeBox(t.output || '(no output)'));
    }
    if (t.traceback) {
      const mine = userFrames(t.traceback);
      box.append(el('b', '', 'traceback'));
      if (mine) {
        box.append(el('span', 'agentstack-muted', " (your code's frames)"), codeBox(mine),
          el('details', 'agentstack-full-traceback', el('summary', '', 'full traceback'), codeBox(t.traceback)));
      } else {
        box.append(codeBox(t.traceback));
      }
    }
  }
  return box;
}

function answersView(n: IRunNode): HTMLElement | null {
  const answers = n.answers || n.metadata?.answers || [];
  const decisions = (n.tools || []).map(record).filter(t => t.tool === 'python').map(t => t.decision);
  let approvals = 0;
  const items: HTMLElement[] = [];
  for (const a of answers) {
    const by = sourceLabel(a.source);
    let summary: string;
    let shown: string;
    if (a.kind === 'approval') {
      const decided = decisions[approvals++];
      const ok = a.answer && typeof a.answer === 'object' ? (a.answer as any).approved : a.answer;
      shown = decided || (ok === true || ['approve', 'approved', 'yes', 'y', 'ok', 'run'].includes(String(ok).toLowerCase())
        ? 'approved' : 'rejected');
      summary = `Code ${shown} ${by}`;
    } else {
      if (a.answer === null || a.answer === undefined || a.answer === '') {
        continue;
      }
      shown = typeof a.answer === 'string' ? a.answer : JSON.stringify(a.answer);
      summary = `${excerpt(a.question, 60)} → ${excerpt(shown, 40)} (${by})`;
    }
    items.push(el('details', 'agentstack-qa-item', el('summary', '', summary),
      el('div', '', el('b', '', 'Q: '), a.question || ''), el('div', '', el('b', '', 'A: '), shown)));
  }
  return items.length ? el('div', 'agentstack-qa', ...items) : null;
}

/** Model text as rendered Markdown (untrusted, sanitised); its plain text when it cannot be rendered. */
export function markdown(host: IMarkdownHost, source: string): HTMLElement {
  const box = el('div', 'agentstack-prose');
  void renderMarkdown({
    host: box, source, trusted: false, sanitizer: host.sanitizer, resolver: host.resolver ?? null,
    linkHandler: host.linkHandler ?? null, shouldTypeset: false, latexTypesetter: host.latexTypesetter ?? null,
    markdownParser: host.markdownParser ?? null
  }).catch(err => {
    box.textContent = source; // never lose the answer: its text, unrendered
    console.warn('agentstack-lab: could not render Markdown', err);
  });
  return box;
}

/** One agent and its subagents; `root` stays open, a finished subagent folds to its header line. */
export function runNode(n: IRunNode, md: IMarkdownHost, root = true): HTMLElement {
  const own = failedCount(n);
  const below = failedBelow(n);
  const folded = !root && TERMINAL.includes(n.status);
  const title = titleOf(n.prompt, 200);
  const head = el(folded ? 'summary' : 'div', 'agentstack-run-head');
  if (own || below) {
    const text = own ? `code failed${own > 1 ? ` ×${own}` : ''}` : 'code failed in a subagent';
    head.append(el('span', 'agentstack-failed-flag', `✗ ${text}`), ' ');
  }
  head.append(el('span', `agentstack-badge s-${n.status}`, STATUS_LABELS[n.status] || n.status), ' ',
    el('b', '', n.type), title ? ` · ${title}` : '');
  if (folded && (n.result || n.error)) {
    head.append(' ', el('span', 'agentstack-muted agentstack-run-excerpt', `→ ${excerpt(n.result || n.error, 90)}`));
  }
  head.append(' ', el('span', 'agentstack-muted', tokens(n)));
  if (n.cost?.text) {
    head.append(el('span', 'agentstack-muted agentstack-cost', ` · cost ${n.cost.text}`));
  }
  const node = el(folded ? 'details' : 'div',
    `agentstack-snapshot-node s-${n.status}${own || below ? ' agentstack-code-failed' : ''}`, head);
  const typed = typedPrompt(n.prompt).trim();
  if (typed && typed !== title) {
    node.append(el('div', 'agentstack-muted agentstack-run-prompt-full', typed));
  }
  const qa = answersView(n);
  if (qa) {
    node.append(qa);
  }
  for (const t of n.tools || []) {
    node.append(toolView(record(t)));
  }
  if (n.result) {
    node.append(el('div', 'agentstack-result', el('b', '', root ? 'Final answer' : 'Result'), markdown(md, n.result)));
  }
  if (n.error) {
    node.append(el('div', 'agentstack-error', el('b', '', `${n.status}: `), n.error));
  }
  if (n.children?.length) {
    node.append(el('div', 'agentstack-run-children', ...n.children.map(c => runNode(c, md, false))));
  }
  return node;
}
