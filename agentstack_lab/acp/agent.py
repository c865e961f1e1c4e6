"""Our recursive agent as an Agent Client Protocol agent (``agentstack-lab acp``; hosts: jupyter-ai, Zed, marimo, ...).

One ACP session is one memory session of the workspace its ``cwd`` picks (found as the CLI finds it: the
nearest ``agentstack.config.json`` upwards, else the folder itself). A prompt starts a run -- a follow-up of the
session's previous run when there is one -- and streams it (:mod:`agentstack_lab.acp.updates`) until the run
ends or asks a question. Where the code runs is explicit: the ``acp`` surface defaults to the subprocess
executor (config ``agents.executor`` may say otherwise), never a notebook's kernel.

Decisions stay ours. A code approval (or a consensus checkpoint, or the resource monitor's intervention) is a
persisted decision *and* a ``session/request_permission`` request: the host's answer resolves the decision,
and an answer from another surface first (the Agents panel, ``agentstack-lab decisions approve``, MCP) wins
instead -- the host is told who answered, in the tool call's content, and its late answer changes nothing.
"Allow always" approves the session's later code without asking. A question (clarification, blocking) is a
form (``elicitation/create``, one answer field, its choices as an enum) when the host says it supports forms,
raced like a permission with answers from other surfaces; otherwise -- or when the host declines the form --
it ends the turn with the question as the message, and the next prompt answers it and the same run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp import schema as s
from acp.interfaces import Client

from agentstack_lab._version import __version__
from agentstack_lab.acp.updates import RunUpdates
from agentstack_lab.decisions import DecisionClosedError, decisions_for
from agentstack_lab.engine import AgentRun
from agentstack_lab.engine.log import read_events
from agentstack_lab.engine.options import run_options
from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import AgentCompleted, ErrorEvent, OutboundEvent, UserQuery, surface_label
from agentstack_lab.workspace import Workspace, root_for

__all__ = ["LabAgent", "PERMISSION_KINDS", "QUESTION_KINDS"]

log = logging.getLogger(__name__)

PERMISSION_KINDS = ("approval", "consensus", "intervention")
"""Decisions a host answers with ``session/request_permission`` (the rest are questions, answered by a prompt)."""
QUESTION_KINDS = ("clarification", "blocking", "final")

_OPTIONS: dict[str, list[s.PermissionOption]] = {
    "approval": [s.PermissionOption(option_id="approve", name="Run it", kind="allow_once"),
                 s.PermissionOption(option_id="approve-always", name="Always allow code like this (this session)",
                                    kind="allow_always"),
                 s.PermissionOption(option_id="reject", name="Don't run it", kind="reject_once")],
    "consensus": [s.PermissionOption(option_id="approve", name="Approve the plan", kind="allow_once"),
                  s.PermissionOption(option_id="reject", name="Reject the plan", kind="reject_once")],
    "intervention": [s.PermissionOption(option_id="approve", name="Resume", kind="allow_once"),
                     s.PermissionOption(option_id="reject", name="Stop the agent", kind="reject_once")],
}


def _answer(kind: str, approve: bool, always: bool = False) -> Any:
    """Our vocabulary for a permission outcome: a verdict for approvals and plans, resume/stop for a pause.

    ``always`` (the host's allow_always on a code approval) is "Always allow code like this" for the session,
    as on the other surfaces: the engine saves a rule for this code's classes, and the approval rules decide
    later cells (a cell of other classes is asked again; a built-in deny is never lifted).
    """
    if kind == "intervention":
        return "resume" if approve else "stop"
    return {"approved": approve, "always": "session"} if approve and always and kind == "approval" else \
        {"approved": approve}


def _fail(message: str) -> RequestError:
    """A request the session cannot take: one line, and nothing changed."""
    return RequestError(-32602, message)


def prompt_text(blocks: list[Any]) -> str:
    """A prompt's content blocks as our prompt's text: text as is, embedded text resources quoted, links named."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(f"[{res.uri}]\n{text}" if text is not None else f"[{res.uri}] (binary, not read)")
        elif kind == "resource_link":
            parts.append(f"[attached: {block.uri}]")
        else:
            raise _fail(f"this agent reads text and text resources; a {kind} block was sent")
    return "\n\n".join(p for p in parts if p)


@dataclass
class _Session:
    id: str
    ws: Workspace
    cwd: str
    run: AgentRun | None = None
    view: RunUpdates | None = None
    cancelled: bool = False
    turn: asyncio.Future[str] | None = None
    pump: asyncio.Task[None] | None = None
    asks: set[asyncio.Task[None]] = field(default_factory=set[asyncio.Task[None]])
    announced: set[str] = field(default_factory=set[str])


class LabAgent:
    """The ACP agent side: sessions, prompts, cancel, load; one instance per connection."""

    def __init__(self, *, workspace: str | Path | None = None, provider: Any = None):
        """One connection's agent.

        ``workspace`` fixes every session's workspace; ``provider`` (a provider object) replaces the
        workspace's configured one, for embedding and tests.
        """
        self._default = Path(workspace).resolve() if workspace is not None else None
        self._provider = provider
        self._forms = False
        self._conn: Client | None = None
        self._host = "an ACP host"
        self._sessions: dict[str, _Session] = {}
        self._workspaces: dict[Path, Workspace] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def conn(self) -> Client:
        assert self._conn is not None, "on_connect runs before any request"
        return self._conn

    # --- the protocol --------------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: s.ClientCapabilities | None = None,
                         client_info: s.Implementation | None = None, **_: Any) -> s.InitializeResponse:
        if client_info is not None:
            self._host = client_info.title or client_info.name
        forms = client_capabilities.elicitation if client_capabilities is not None else None
        self._forms = forms is not None and forms.form is not None
        return s.InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=s.AgentCapabilities(
                load_session=True,
                # text and embedded text resources; no images or audio; MCP servers a host offers are not used
                prompt_capabilities=s.PromptCapabilities(image=False, audio=False, embedded_context=True),
                mcp_capabilities=s.McpCapabilities(http=False, sse=False)),
            agent_info=s.Implementation(name="agentstack-lab", title="agentstack-lab", version=__version__),
            auth_methods=[])

    async def authenticate(self, method_id: str, **_: Any) -> s.AuthenticateResponse | None:
        raise _fail("this agent needs no authentication (providers use the workspace's configured keys)")

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any) -> s.NewSessionResponse:
        ws = self._workspace(cwd)
        session = ws.sessions.start(f"ACP · {self._host}", metadata={"surface": "acp", "host": self._host, "cwd": cwd})
        self._sessions[session.id] = _Session(id=session.id, ws=ws, cwd=cwd)
        return s.NewSessionResponse(session_id=session.id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **_: Any) -> s.LoadSessionResponse | None:
        ws = self._workspace(cwd)
        rows = ws.db.query("SELECT id, prompt FROM agents WHERE session_id = ? AND parent_id IS NULL AND run_id = id"
                           " ORDER BY created_at", (session_id,))
        known = ws.db.query("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
        if not rows and not known:
            raise _fail(f"no session {session_id!r} in the workspace at {ws.root}")
        sess = self._sessions.get(session_id) or _Session(id=session_id, ws=ws, cwd=cwd)
        self._sessions[session_id] = sess
        for run_id, prompt in rows:
            await self._send(sess, s.UserMessageChunk(session_update="user_message_chunk",
                                                      content=s.TextContentBlock(type="text", text=prompt or "")))
            view = RunUpdates(run_id)
            for _seq, event in read_events(ws.db, run_id):
                for update in view.feed(event):
                    await self._send(sess, update)
                await self._closing_words(sess, view, event)
        return s.LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> s.PromptResponse:
        sess = self._session(session_id)
        if sess.turn is not None and not sess.turn.done():
            raise _fail(f"session {session_id} is already answering a prompt; cancel it or wait for its end")
        text = prompt_text(prompt).strip()
        if not text:
            raise _fail("the prompt is empty")
        sess.turn = asyncio.get_running_loop().create_future()
        sess.cancelled = False
        question = self._open_question(sess)
        try:
            if question is not None:
                assert sess.run is not None
                sess.run.respond(question.query_id, text, surface="acp", by=self._host)
                self._announce_questions(sess)
            else:
                self._start(sess, text)
        except (AgentstackError, KeyError, ValueError) as exc:
            sess.turn = None
            raise _fail(str(exc).strip("'\"")) from None
        stop = await sess.turn
        return s.PromptResponse(stop_reason=stop, usage=self._usage(sess))  # pyright: ignore[reportArgumentType]

    async def cancel(self, session_id: str, **_: Any) -> None:
        sess = self._sessions.get(session_id)
        if sess is None or sess.run is None or sess.run.done:
            return
        sess.cancelled = True
        for task in list(sess.asks):
            task.cancel()
        sess.run.stop(reason=f"cancelled from {self._host}")

    async def close_session(self, session_id: str, **_: Any) -> s.CloseSessionResponse | None:
        """The host is done with the session: its run stops and it leaves this connection (the log keeps it)."""
        await self.cancel(session_id)
        self._sessions.pop(session_id, None)
        return s.CloseSessionResponse()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> s.ListSessionsResponse:
        ws = self._workspace(cwd) if cwd else None
        rows = ws.db.query("SELECT id, name, started_at FROM sessions WHERE json_extract(metadata, '$.surface') = 'acp'"
                           " ORDER BY started_at DESC LIMIT 100") if ws is not None else []
        return s.ListSessionsResponse(sessions=[s.SessionInfo(session_id=r[0], cwd=cwd or "", title=r[1])
                                                for r in rows])

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        for sess in self._sessions.values():
            if sess.run is not None and not sess.run.done:
                sess.run.stop(reason=f"{self._host} closed the connection")
        for ws in self._workspaces.values():
            ws.close()

    # --- sessions ------------------------------------------------------------------------------------
    def _workspace(self, cwd: str) -> Workspace:
        folder = Path(cwd)
        if not folder.is_absolute():
            raise _fail(f"cwd must be an absolute path, got {cwd!r}")
        if not folder.is_dir():
            raise _fail(f"cwd {cwd!r} is not a folder")
        if self._default is not None:
            root = self._default
        else:
            root = root_for(folder)
        if root not in self._workspaces:
            self._workspaces[root] = Workspace.open(root, announce=False)
        return self._workspaces[root]

    def _session(self, session_id: str) -> _Session:
        sess = self._sessions.get(session_id)
        if sess is None:
            raise _fail(f"no session {session_id!r} on this connection (session/new or session/load first)")
        return sess

    def _start(self, sess: _Session, text: str) -> None:
        follows = sess.run if sess.run is not None and sess.run.done and sess.run.status == "completed" else None
        options = run_options(sess.ws.config, surface="acp")
        run = AgentRun(text, workspace=sess.ws, options=options, session_id=None if follows else sess.id,
                       origin=f"acp:{self._host}", follows=follows, provider=self._provider)
        sess.run, sess.view, sess.announced = run, RunUpdates(run.root_id), set()
        queue: asyncio.Queue[OutboundEvent | None] = asyncio.Queue()
        run.subscribe(queue.put_nowait, replay=True)
        run.start()
        waiter = asyncio.ensure_future(run.wait(raise_on_error=False))
        waiter.add_done_callback(lambda _t: queue.put_nowait(None))
        sess.pump = asyncio.get_running_loop().create_task(self._pump(sess, run, queue))

    async def _pump(self, sess: _Session, run: AgentRun, queue: asyncio.Queue[OutboundEvent | None]) -> None:
        """Send the run's updates in order; answer its decisions; end the turn at its end or its question."""
        view = sess.view
        assert view is not None
        try:
            while (event := await queue.get()) is not None:
                for update in view.feed(event):
                    await self._send(sess, update)
                if isinstance(event, UserQuery):
                    ask = self._permission if event.kind in PERMISSION_KINDS else self._form if self._forms else None
                    if ask is not None:
                        task = asyncio.get_running_loop().create_task(ask(sess, run, event))
                        sess.asks.add(task)
                        task.add_done_callback(sess.asks.discard)
                    else:
                        self._announce_questions(sess)
                await self._closing_words(sess, view, event)
        except Exception:  # a broken pipe or a bug: the prompt still ends, with what is known
            log.exception("ACP session %s: sending the run's updates failed", sess.id)
        finally:
            for task in list(sess.asks):
                task.cancel()
            self._end_turn(sess, "cancelled" if sess.cancelled else "end_turn")

    async def _closing_words(self, sess: _Session, view: RunUpdates, event: OutboundEvent) -> None:
        """The root's end: its result as the message when it streamed none; its error said in words."""
        if event.agent_id != view.root_id:
            return
        if isinstance(event, AgentCompleted) and view.root_text == 0 and event.result:
            await self._say(sess, event.result)
        elif isinstance(event, ErrorEvent):
            await self._say(sess, f"\n\nThe run ended without an answer: {event.error}")

    def _open_question(self, sess: _Session) -> UserQuery | None:
        if sess.run is None or sess.run.done:
            return None
        return next((q for q in sess.run.pending_queries if q.kind in QUESTION_KINDS), None)

    def _announce_questions(self, sess: _Session) -> None:
        """The oldest unanswered question as the message, and the turn ends: the next prompt answers it."""
        question = self._open_question(sess)
        if question is None or question.query_id in sess.announced:
            return
        sess.announced.add(question.query_id)
        choices = question.options.get("choices") or question.options.get("options")
        listed = f"\n\nChoices: {', '.join(map(str, choices))}" if isinstance(choices, list) and choices else ""
        text = f"\n\n**The agent asks** ({question.kind}): {question.prompt}{listed}\n\n_Reply with your answer._"

        async def say_and_end() -> None:
            await self._say(sess, text)
            self._end_turn(sess, "end_turn")

        task = asyncio.get_running_loop().create_task(say_and_end())
        task.add_done_callback(lambda t: t.cancelled() or t.exception() and log.error(
            "ACP session %s: asking the question failed: %s", sess.id, t.exception()))

    async def _permission(self, sess: _Session, run: AgentRun, query: UserQuery) -> None:
        """Ask the host and wait for the decision from any surface; exactly one answer wins (the store's)."""
        view = sess.view
        assert view is not None
        by = self._host
        call = view.call_for(query.agent_id) if query.kind == "approval" else None
        if call is None:   # a plan checkpoint or a pause: a tool call of its own to hang the request on
            call = f"{query.kind}-{query.query_id[:8]}"
            await self._send(sess, s.ToolCallStart(session_update="tool_call", tool_call_id=call, kind="think",
                                                   title=f"{query.kind.capitalize()}: {query.prompt[:80]}",
                                                   status="pending", content=[_note(query.prompt)]))
        code = query.options.get("code")
        content = [_note(f"```python\n{code}\n```")] if isinstance(code, str) else [_note(query.prompt)]
        ask = asyncio.ensure_future(self.conn.request_permission(
            session_id=sess.id, options=_OPTIONS[query.kind],
            tool_call=s.ToolCallUpdate(tool_call_id=call, title=query.prompt, status="pending",
                                       kind="execute" if query.kind == "approval" else "think", content=content,
                                       raw_input=dict(query.options),
                                       field_meta={"agentstack-lab": {"decisionId": query.query_id,
                                                                      "runId": run.run_id, "kind": query.kind}})))
        elsewhere = asyncio.ensure_future(decisions_for(sess.ws).wait(query.query_id))
        try:
            done, _ = await asyncio.wait({ask, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
            if ask in done and ask.exception() is None:
                outcome = ask.result().outcome
                # "cancelled": the host withdrew the request (its cancel of the turn stops the run too): fail closed
                chosen = "reject" if isinstance(outcome, s.DeniedOutcome) else outcome.option_id
                try:
                    run.respond(query.query_id, _answer(query.kind, chosen.startswith("approve"),
                                                        always=chosen == "approve-always"), surface="acp",
                                by=by if not isinstance(outcome, s.DeniedOutcome) else f"{by} (request cancelled)")
                except (DecisionClosedError, KeyError):
                    decision = await elsewhere
                    await self._answered_elsewhere(sess, call, decision)
                return
            if ask in done:
                log.warning("ACP session %s: the permission request failed: %s", sess.id, ask.exception())
            decision = await elsewhere
            await self._answered_elsewhere(sess, call, decision)
        finally:
            ask.cancel()
            elsewhere.cancel()

    async def _form(self, sess: _Session, run: AgentRun, query: UserQuery) -> None:
        """A question as the host's form, raced with an answer from elsewhere; declined = asked as a message."""
        raw = query.options.get("choices") or query.options.get("options")
        choices = [str(c) for c in raw] if isinstance(raw, list) and raw else None  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        field = s.ElicitationStringPropertySchema(type="string", title="Your answer", description=query.prompt,
                                                  enum=choices)
        form = asyncio.ensure_future(self.conn.create_elicitation(
            message=f"The agent asks ({query.kind}): {query.prompt}",
            mode=s.ElicitationFormSessionMode(session_id=sess.id, requested_schema=s.ElicitationSchema(
                title="agentstack-lab", properties={"answer": field}, required=["answer"])),
            **{"agentstack-lab": {"decisionId": query.query_id, "runId": run.run_id, "kind": query.kind}}))
        elsewhere = asyncio.ensure_future(decisions_for(sess.ws).wait(query.query_id))
        try:
            done, _ = await asyncio.wait({form, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
            if form in done:
                reply = form.result() if form.exception() is None else None
                answer = (reply.content or {}).get("answer") if isinstance(reply, s.AcceptElicitationResponse) else None
                if isinstance(answer, str) and answer.strip():
                    with contextlib.suppress(DecisionClosedError, KeyError):   # answered elsewhere meanwhile: that won
                        run.respond(query.query_id, answer, surface="acp", by=self._host)
                    return
                if reply is None:
                    log.warning("ACP session %s: the form failed: %s", sess.id, form.exception())
                self._announce_questions(sess)   # declined, cancelled or empty: the next prompt answers
        finally:
            form.cancel()
            elsewhere.cancel()

    async def _answered_elsewhere(self, sess: _Session, call: str, decision: Any) -> None:
        """The decision was settled on another surface first: the host's tool call says so."""
        if decision.state == "answered":
            verdict = decision.approved
            word = "Approved" if verdict or decision.answer == "resume" else "Rejected"
            line = f"{word} from {surface_label(decision.surface)} by {decision.answered_by or 'someone'}."
        else:
            verdict, line = False, f"No answer needed any more: {decision.closed_message()}."
        await self._send(sess, s.ToolCallProgress(
            session_update="tool_call_update", tool_call_id=call,
            status="in_progress" if verdict or decision.answer == "resume" else "failed", content=[_note(line)]))

    # --- sending -------------------------------------------------------------------------------------
    async def _send(self, sess: _Session, update: Any) -> None:
        await self.conn.session_update(session_id=sess.id, update=update)

    async def _say(self, sess: _Session, text: str) -> None:
        await self._send(sess, s.AgentMessageChunk(session_update="agent_message_chunk",
                                                   content=s.TextContentBlock(type="text", text=text)))

    def _end_turn(self, sess: _Session, stop: str) -> None:
        if sess.turn is not None and not sess.turn.done():
            sess.turn.set_result(stop)

    def _usage(self, sess: _Session) -> s.Usage | None:
        if sess.run is None:
            return None
        usage = sess.run.tree.get("usage") or {}
        tokens_in, tokens_out = int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0)
        return s.Usage(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out)


def _note(text: str) -> Any:
    return s.ContentToolCallContent(type="content", content=s.TextContentBlock(type="text", text=text))
