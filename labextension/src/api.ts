/**
 * REST and WebSocket access to the agentstack-lab server extension, behind Jupyter's own auth
 * (ServerConnection adds the token and the XSRF header).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IRun {
  id: string;
  status: string;
  prompt: string;
  type: string;
  createdAt: string;
  endedAt: string | null;
  agents?: number;
  tokens?: number;
  /** What the run cost in USD, priced by the server (agentstack_lab/providers/prices.py). */
  cost?: ICost;
  waiting?: number;
  waitingForYou?: number;
  origin?: string | null;
  /** A follow-up's predecessor run and its question. */
  continues?: string | null;
  continuesPrompt?: string | null;
  /** A notebook origin's path relative to the server's root (only when inside it), and the cell that started it. */
  notebook?: string | null;
  cellId?: string | null;
  /** Where its code runs: "live" (the kernel), "subprocess", ... */
  executor?: string | null;
  /** A pause was applied: the run holds before its next step (Resume lifts it). */
  paused?: boolean;
}

/** GET info: the workspace this server serves (relative to its root folder when inside it). */
export interface IInfo {
  workspace: string;
  database: string;
  root: string | null;
}

export interface IDecision {
  id: string;
  kind: string;
  prompt: string;
  state: string;
  runId: string | null;
  agentId: string | null;
  code: string | null;
  options: { choices?: string[]; dryRun?: IDryRun } & Record<string, unknown>;
  createdAt: number;
  /** A pending code approval: the rule "Always allow code like this" would save, or why it cannot. */
  alwaysRule?: { description: string | null; refused: string | null } | null;
  /** The asking agent's type, its run's prompt, where approved code runs ("live", "subprocess"). */
  agentType?: string | null;
  runPrompt?: string | null;
  executor?: string | null;
}

/** What the code did in a sandboxed fork of the kernel (engine/sandbox.py), as the approval card shows it. */
export interface IDryRun {
  clean: boolean;
  ended: string;
  changes?: { name: string; action: string; before: string; after: string }[];
  stdout?: string;
  stderr?: string;
  error?: string | null;
  refused?: { call: string; target?: string; error?: string }[];
  protections?: Record<string, string>;
}

export interface ITreeNode {
  id: string;
  type: string;
  status: string;
  prompt?: string;
  result?: string | null;
  error?: string | null;
  content?: string;
  usage?: Record<string, number>;
  /** The subtree's cost in USD, priced by the server. */
  cost?: ICost;
  children?: ITreeNode[];
}

/** A cost in USD: ``text`` is "$0.0123", "~$0.0123" (estimated), "≥ $0.0123" (some unknown), "unknown" or "". */
export interface ICost {
  usd: number | null;
  basis: string;
  text: string;
}

const settings = ServerConnection.makeSettings();

export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const url = URLExt.join(settings.baseUrl, 'agentstack/api', path);
  const res = await ServerConnection.makeRequest(url, init, settings);
  const text = await res.text();
  const data = text ? JSON.parse(text) : {};
  if (!res.ok) {
    throw new Error(data.message || `${res.status} ${res.statusText}`);
  }
  return data as T;
}

export function post<T>(path: string, body: unknown): Promise<T> {
  return request<T>(path, { method: 'POST', body: JSON.stringify(body) });
}

/** The event socket: every run of the workspace, from any process. Reconnects with ?after=. */
export class EventStream {
  private ws: WebSocket | null = null;
  private seq = 0;
  private closed = false;
  constructor(private onMessage: (msg: any) => void) {}

  connect(): void {
    const params: string[] = [];
    if (this.seq > 0) {
      params.push(`after=${this.seq}`); // a reconnect catches up without gaps
    }
    if (settings.token) {
      params.push(`token=${encodeURIComponent(settings.token)}`);
    }
    const url =
      URLExt.join(settings.wsUrl, 'agentstack/api/events') +
      (params.length ? `?${params.join('&')}` : '');
    const ws = (this.ws = new WebSocket(url));
    ws.onmessage = ev => {
      const msg = JSON.parse(ev.data);
      if (typeof msg.seq === 'number') {
        this.seq = Math.max(this.seq, msg.seq);
      }
      this.onMessage(msg);
    };
    ws.onclose = () => {
      if (!this.closed) {
        setTimeout(() => this.connect(), 2000);
      }
    };
  }

  dispose(): void {
    this.closed = true;
    this.ws?.close();
  }
}
