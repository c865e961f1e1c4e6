"""Magic argument parsing: a line becomes a typed, frozen arguments object.

``%agent`` options come first; everything after the first word that is not an option is the
prompt, kept verbatim (apostrophes, ``?``, braces and all). Bad input raises
:class:`MagicUsageError` whose message is ONE line naming the command and what was wrong
(``%memory search: error: argument --mode: invalid choice: 'x' (choose from ...)``), never argparse's usage
block (4 lines for ``%memory search``, which buried the reason); ``-h`` prints the full help.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from agentstack_lab.errors import AgentstackError
from agentstack_lab.events import QUESTION_KINDS
from agentstack_lab.validation import check_float, check_int, check_threshold

__all__ = [
    "MagicUsageError",
    "AgentArgs",
    "MemoryArgs",
    "parse_agent_line",
    "parse_memory_line",
    "agent_parser",
    "memory_parser",
]

QUERY_KINDS = QUESTION_KINDS  # approvals are given with --auto-approve, not --answer


class OneLineError(AgentstackError):
    """An error IPython shows as one line (``Name: message``) instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class MagicUsageError(AgentstackError, ValueError):
    """A magic line could not be parsed: one line naming what was wrong (``help``: -h was asked for, the message is the help)."""

    def __init__(self, message: str, *, help: bool = False):
        super().__init__(message)
        self.help = help


class _Parser(argparse.ArgumentParser):
    """An argparse parser that raises instead of printing and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise MagicUsageError(one_line(f"{self.prog}: error: {message} ({self.prog.split()[0]} -h for help)"))

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        raise MagicUsageError(one_line((message or "").strip() or f"{self.prog}: bad arguments"))


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (argparse wraps long messages) folded into single spaces."""
    return " ".join(text.split())


def _positive_int(text: str) -> int:
    try:
        return check_int("value", int(text))
    except ValueError:  # UsageError is a ValueError too; argparse names the option
        raise argparse.ArgumentTypeError(f"expected an integer between 0 and 2**63-1, got {text!r}") from None


def _threshold(text: str) -> float:
    try:
        return check_threshold("value", float(text))  # type: ignore[return-value]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number between 0 and 1, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        return check_float("value", float(text), above=0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}") from None


def _session(text: str) -> str:
    """A ``--session`` value: ``""`` is an error, never "no session" (a private note would land in the shared namespace)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"session id must be a non-empty string, got {text!r}; "
                                         "leave --session out to use the shared namespaces")
    return text


def _cluster(text: str) -> str:
    from agentstack_lab.coordination.dask import check_address  # no Dask import: the address is only checked

    try:
        check_address(text)
    except AgentstackError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _answer(text: str) -> tuple[str, str]:
    kind, sep, reply = text.partition("=")
    if not sep or kind not in QUERY_KINDS:
        raise argparse.ArgumentTypeError(f"expected KIND=TEXT with KIND one of {', '.join(QUERY_KINDS)}, got {text!r}")
    return kind, reply


@dataclass(frozen=True)
class AgentArgs:
    """The parsed ``%agent`` / ``%%agent`` line."""

    prompt: str
    type: str | None = None
    provider: str | None = None
    model: str | None = None
    max_depth: int | None = None
    max_children: int | None = None
    max_agents: int | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    subagents: bool = True
    auto_approve: bool = False
    wait: bool = False
    session: str | None = None
    executor: str | None = None
    answers: dict[str, str] = field(default_factory=dict)
    identity: str | None = None
    on_query: str | None = None
    decision_timeout: str | None = None
    coordinate: bool = False
    max_workers: int | None = None
    cluster: str | None = None
    record: str | None = None
    replay: str | None = None
    replay_mode: str | None = None
    follow_up: bool = False  # --continue: a follow-up of this kernel's previous run

    def given_options(self) -> dict[str, Any]:
        """The run options the line sets explicitly (``None`` and unset flags left out)."""
        given = {"max_depth": self.max_depth, "max_children": self.max_children, "max_agents": self.max_agents,
                 "max_tokens": self.max_tokens, "timeout_s": self.timeout, "executor": self.executor,
                 "auto_approve": self.auto_approve or None, "identity": self.identity, "on_query": self.on_query,
                 "decision_timeout": self.decision_timeout,
                 "coordinate": self.coordinate or None, "max_workers": self.max_workers, "cluster": self.cluster,
                 "record": self.record,
                 "replay": self.replay, "replay_mode": self.replay_mode}
        return {k: v for k, v in given.items() if v is not None}


def agent_parser() -> argparse.ArgumentParser:
    """The ``%agent`` argument parser (also the source of its help text)."""
    p = _Parser(prog="%agent", add_help=False, description="Run a recursive agent on PROMPT. In PROMPT, {expr} inserts a kernel value "
                "({df.shape}, {In[3]}, {Out[4]}, {Err[5]}: cell 5's traceback; {{ and }} are braces) and "
                "@name attaches a description of a variable.",
                usage="%%agent [options] PROMPT   |   %%%%agent [options] (cell body = prompt)")
    p.add_argument("-h", "--help", action="store_true", help="show this help")
    p.add_argument("--continue", dest="follow_up", action="store_true",
                   help="ask a follow-up in the conversation of this kernel's previous run: its questions and "
                        "answers are the context, its session, provider, type and budgets are kept")
    p.add_argument("-t", "--type", help="agent type of the root agent (default: config agents.default_type)")
    p.add_argument("-p", "--provider", help="model provider: a registered name (scripted, anthropic, openai, ollama, ...) "
                   "or @name of a provider object in the kernel")
    p.add_argument("-m", "--model", help="model name passed to the provider")
    p.add_argument("--max-depth", type=_positive_int, help="deepest level of subagents (default 2)")
    p.add_argument("--max-children", type=_positive_int, help="subagents per agent (default 4)")
    p.add_argument("--max-agents", type=_positive_int, help="agents in the whole tree (default 16)")
    p.add_argument("--max-tokens", type=_positive_int, help="token budget of the whole tree")
    p.add_argument("--timeout", type=_seconds, help="wall-clock budget in seconds")
    p.add_argument("--no-subagents", dest="subagents", action="store_false", help="answer without subagents")
    p.add_argument("--auto-approve", action="store_true", help="run model-written code without asking")
    p.add_argument("--coordinate", action="store_true",
                   help="queue the root's subquestions on the durable task queue (workers run them)")
    p.add_argument("--max-workers", type=_positive_int, help="in-process workers of a --coordinate run (default 4)")
    p.add_argument("--cluster", type=_cluster, metavar="ADDR",
                   help="place a --coordinate run's subagents on a Dask cluster: tcp://scheduler:8786, or 'local' "
                        "(one LocalCluster per kernel, reused; default: config agents.cluster)")
    p.add_argument("--wait", action="store_true",
                   help="block the cell until the run ends (headless); queries need --auto-approve or --answer")
    p.add_argument("--session", type=_session, help="session id or name whose memory namespace the agents use")
    p.add_argument("--executor", choices=("live", "subprocess"), help="where the python tool runs (default live)")
    p.add_argument("--identity", help="id or display name of the persistent identity the run acts as "
                   "(a retired one is refused)")
    p.add_argument("--answer", action="append", type=_answer, default=[], metavar="KIND=TEXT",
                   help="reply given up front to a clarification, blocking or final question")
    p.add_argument("--on-query", choices=("fail", "wait", "auto"),
                   help="a question nobody answered up front: fail closed, wait for any surface (the widget, "
                        "`agentstack-lab decisions`, MCP), or auto-approve (default: wait; with --wait: fail)")
    p.add_argument("--record", metavar="PATH", help="record every model request and reply (and tool results) "
                   "to this cassette (JSON Lines, secrets redacted)")
    p.add_argument("--replay", metavar="PATH", help="serve the model's replies from this cassette: no network, no key")
    p.add_argument("--replay-mode", choices=("strict", "new_episodes"),
                   help="a request the cassette lacks: fail (strict, the default) or ask the real provider and "
                        "record it (new_episodes)")
    p.add_argument("--decision-timeout", metavar="DURATION",
                   help="how long a question waits (seconds, or 90s, 10m, 1h) before it expires and the run fails")
    return p


_TOKEN = re.compile(r"""\s*((?:[^\s"']+|"(?:[^"\\]|\\.)*"|'[^']*')+)""")


def _unquote(token: str) -> str:
    try:
        parts = shlex.split(token)
    except ValueError:
        return token
    return parts[0] if len(parts) == 1 else token


def _split_options(parser: argparse.ArgumentParser, line: str) -> tuple[list[str], str]:
    """Split ``line`` into leading option tokens and the verbatim rest (the prompt)."""
    takes_value = {
        opt: action.nargs != 0 for action in parser._actions for opt in action.option_strings
    }
    tokens: list[str] = []
    pos = 0
    expect_value = False
    while True:
        m = _TOKEN.match(line, pos)
        if not m:
            return tokens, ""
        raw = m.group(1)
        if expect_value:
            tokens.append(_unquote(raw))
            expect_value = False
            pos = m.end()
            continue
        if raw == "--":
            return tokens, line[m.end():].strip()
        if not raw.startswith("-") or raw == "-":
            return tokens, line[m.start(1):].strip()
        name = raw.split("=", 1)[0]
        tokens.append(_unquote(raw))
        expect_value = takes_value.get(name, False) and "=" not in raw
        pos = m.end()


def parse_agent_line(line: str, cell: str | None = None) -> AgentArgs:
    """Parse a ``%agent`` line (and the ``%%agent`` cell body, which is then the prompt).

    Raises:
        MagicUsageError: An unknown or malformed option, or no prompt.
    """
    parser = agent_parser()
    tokens, rest = _split_options(parser, line)
    ns = parser.parse_args(tokens)
    if ns.help:
        raise MagicUsageError(parser.format_help().strip(), help=True)
    if cell is not None:
        if rest:
            parser.error(f"unexpected text after the options: {rest!r} (with %%agent the cell body is the prompt)")
        prompt = cell.strip()
    else:
        prompt = rest
    if not prompt:
        parser.error("a PROMPT is required")
    if ns.cluster is not None and not ns.coordinate:
        parser.error("--cluster only applies with --coordinate")
    values: dict[str, Any] = vars(ns)
    values.pop("help")
    values["answers"] = dict(values.pop("answer"))
    return AgentArgs(prompt=prompt, **values)


@dataclass(frozen=True)
class MemoryArgs:
    """The parsed ``%memory`` line."""

    command: str
    key: str | None = None
    text: str | None = None
    query: str | None = None
    namespace: str | None = None
    agent: str | None = None
    tags: tuple[str, ...] = ()
    mode: str = "hybrid"
    limit: int = 10
    offset: int = 0
    threshold: float | None = None
    session: str | None = None
    wait: bool = False
    batch_size: int = 256


def memory_parser() -> argparse.ArgumentParser:
    """The ``%memory`` argument parser (subcommands mirror ``agentstack-lab memory``)."""
    p = _Parser(prog="%memory", add_help=False, description="Workspace memory: store, get, search, list, delete, reembed.")
    sub = p.add_subparsers(dest="command", metavar="{store,get,search,list,delete,reembed}", parser_class=_Parser)
    sub.required = True

    def ns_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-n", "--namespace", help="namespace (default: default, or the session's own)")
        sp.add_argument("-s", "--session", type=_session, help="act within this active session (its private namespace)")

    s = sub.add_parser("store", add_help=False, help="store KEY TEXT (or %%memory store KEY with the text as body)")
    s.add_argument("key")
    s.add_argument("text", nargs="*")
    ns_opts(s)
    s.add_argument("--tags", help="comma-separated tags")
    s.add_argument("--agent", help="agent id owning the entry")
    g = sub.add_parser("get", add_help=False, help="get KEY")
    g.add_argument("key")
    ns_opts(g)
    q = sub.add_parser("search", add_help=False, help="search QUERY")
    q.add_argument("query", nargs="+")
    ns_opts(q)
    q.add_argument("--mode", choices=("hybrid", "fts", "vector"), default="hybrid")
    q.add_argument("--limit", type=_positive_int, default=10)
    q.add_argument("--threshold", type=_threshold, help="minimum score, 0..1")
    q.add_argument("--agent", help="only entries of this agent (plus shared ones)")
    ls = sub.add_parser("list", add_help=False, help="list entries, newest first")
    ns_opts(ls)
    ls.add_argument("--limit", type=_positive_int, default=20)
    ls.add_argument("--offset", type=_positive_int, default=0)
    ls.add_argument("--agent", help="only entries of this agent")
    d = sub.add_parser("delete", add_help=False, help="delete KEY")
    d.add_argument("key")
    ns_opts(d)
    r = sub.add_parser("reembed", add_help=False,
                       help="re-embed every entry with the configured embedder, in the background (resumable)")
    r.add_argument("--wait", action="store_true", help="return when it is done (default: at once, with a handle)")
    r.add_argument("--batch-size", type=_positive_int, default=256, help="entries embedded per batch")
    return p


def parse_memory_line(line: str, cell: str | None = None) -> MemoryArgs:
    """Parse a ``%memory`` line; for ``%%memory store KEY`` the cell body is the text.

    Raises:
        MagicUsageError: Unknown subcommand or option, missing arguments, unbalanced quotes.
    """
    parser = memory_parser()
    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        raise MagicUsageError(f"%memory: error: unbalanced quotes in the line: {exc} (%memory -h for help)") from None
    if not tokens or tokens[0] in ("-h", "--help", "help"):
        raise MagicUsageError(parser.format_help().strip(), help=True)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    if tokens[0] in commands and {"-h", "--help"} & set(tokens[1:]):
        raise MagicUsageError(commands[tokens[0]].format_help().strip(), help=True)
    ns = parser.parse_args(tokens)
    values = vars(ns)
    text = " ".join(values.pop("text", []) or [])
    if cell is not None:
        if ns.command != "store":
            parser.error("only `%%memory store KEY` takes a cell body")
        if text:
            parser.error("with %%memory store the cell body is the text; give only KEY on the line")
        text = cell.strip()
    if ns.command == "store" and not text:
        parser.error("store needs TEXT (or use %%memory store KEY with the text as the cell body)")
    if "query" in values:
        values["query"] = " ".join(values["query"])
    tags = values.pop("tags", None)
    return MemoryArgs(
        text=text or None,
        tags=tuple(t.strip() for t in tags.split(",") if t.strip()) if tags else (),
        **values,
    )
