"""The notebook-side workflow API: declare phases in cells, run them, publish the report.

Example (in a notebook cell; IPython allows top-level ``await``)::

    from agentstack_lab.workflows.api import Workflow

    wf = Workflow("doc_sync", max_iterations=3, parameters={"target": "docs/"})

    @wf.phase("inventory")
    def inventory(scope):
        scope.state["docs"] = sorted(Path(scope.params["target"]).rglob("*.md"))

    @wf.phase("adversarial")
    def adversarial(scope):
        if scope.state["docs"] == []:
            scope.finding("docs exist", "no Markdown under target", "high")
            scope.fail("nothing to check")

    report = await wf.run()     # prints progress, displays the report, returns a WorkflowReport

The report is displayed with the ``application/vnd.agentstack.workflow-report+json`` mimetype;
``agentstack-lab workflow run`` picks it up into the executed notebook's metadata and the
``--report`` JSON file. ``wf.run(report_path=...)`` also writes it from inside the notebook.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentstack_lab.workflows.model import PHASES, WorkflowConfig, WorkflowEvent, WorkflowReport
from agentstack_lab.workflows.runner import PhaseError, PhaseExecutor, PhaseRunner

if TYPE_CHECKING:
    from agentstack_lab.workspace import Workspace

__all__ = ["REPORT_MIME", "AgentNote", "Workflow", "ask_agent", "cassette_options", "choose_provider"]

REPORT_MIME = "application/vnd.agentstack.workflow-report+json"


class Workflow:
    """Phases declared with ``@wf.phase(name)``, run in the standard order by a :class:`PhaseRunner`."""

    def __init__(self, name: str, *, max_iterations: int | None = None, parameters: dict[str, Any] | None = None,
                 verbose: bool = True):
        """``max_iterations`` None: ``workflows.max_iterations`` of the config found from the cwd (3)."""
        if max_iterations is None:
            from agentstack_lab.config import load_config

            max_iterations = load_config().workflows.max_iterations
        self.name = name
        self.max_iterations = max_iterations
        self.parameters = dict(parameters or {})
        self.verbose = verbose
        self.executors: dict[str, PhaseExecutor] = {}
        self.runner: PhaseRunner | None = None
        self.report: WorkflowReport | None = None

    def phase(self, name: str) -> Callable[[PhaseExecutor], PhaseExecutor]:
        """Decorator registering ``fn(scope)`` as the executor of phase ``name``."""
        if name not in PHASES:
            raise ValueError(f"unknown workflow phase {name!r}; valid phases: {list(PHASES)}")

        def register(fn: PhaseExecutor) -> PhaseExecutor:
            self.executors[name] = fn
            return fn

        return register

    def _print(self, event: WorkflowEvent) -> None:
        if event.type == "phase:start":
            print(f"▶ {event.phase} (iteration {event.iteration})", flush=True)
        elif event.type == "phase:complete":
            res = event.data
            mark = "✓" if res.success else "✗"
            print(f"  {mark} {event.phase}: {len(res.findings)} finding(s) in {res.duration:.2f}s", flush=True)
        elif event.type == "workflow:error":
            print(f"  ! {event.phase} raised {event.data['error']}", flush=True)
        elif event.type == "workflow:complete":
            print(f"■ {self.name}: {event.data['verdict']}", flush=True)

    async def run(self, *, report_path: str | os.PathLike | None = None, display: bool = True) -> WorkflowReport:
        """Run the declared phases (reconciling on adversarial FAIL); display and return the report.

        When a phase raises, the report so far (verdict ERROR) is still displayed and written,
        then the :class:`~agentstack_lab.workflows.runner.PhaseError` propagates (the cell fails).
        """
        phases = tuple(p for p in PHASES if p in self.executors)
        config = WorkflowConfig(name=self.name, phases=phases, max_iterations=self.max_iterations,
                                parameters=self.parameters)
        self.runner = PhaseRunner(config, self.executors)
        if self.verbose:
            self.runner.subscribe(self._print)
        try:
            self.report = await self.runner.run()
        except PhaseError:
            # the run could not complete: publish what it had (verdict ERROR), then let the cell fail
            self._publish(self.runner.report(), report_path, display)
            raise
        self._publish(self.report, report_path, display)
        return self.report

    @staticmethod
    def _publish(report: WorkflowReport, report_path: str | os.PathLike | None, display: bool) -> None:
        data = report.to_dict()
        if report_path is not None:
            Path(report_path).write_text(json.dumps(data, indent=2) + "\n", "utf-8")
        if display:
            publish(data)


def _markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    sev = s["findingsBySeverity"]
    lines = [f"### {report['workflow']}: **{report['verdict']}**", "",
             f"{s['findingsTotal']} finding(s) — {sev['high']} high, {sev['medium']} medium, {sev['low']} low; "
             f"{report['iterations']} of {report['maxIterations']} iteration(s); confidence {report['confidence']}.",
             ""]
    rows = [f for p in report["phases"] for f in p["findings"]]
    if rows:
        lines += ["| severity | phase | where | claim | contradiction |", "|---|---|---|---|---|"]
        for f in rows[:50]:
            where = f"{f.get('file', '')}:{f.get('line', '')}".strip(":")
            cells = [f["severity"], f.get("phase", ""), where, f["claim"], f["contradiction"]]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def publish(report: dict[str, Any]) -> None:
    """Display ``report`` as Markdown plus the machine-readable report mimetype."""
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency
        print(json.dumps(report, indent=2))
        return
    display({"text/markdown": _markdown(report), REPORT_MIME: report}, raw=True)


class AgentNote:
    """An agent's commentary: its text, the provider used, and whether it was the offline one."""

    def __init__(self, text: str, provider: str, offline: bool, error: str | None = None):
        self.text, self.provider, self.offline, self.error = text, provider, offline, error

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "provider": self.provider, "offline": self.offline, "error": self.error}

    def __repr__(self) -> str:
        return f"AgentNote(provider={self.provider!r}, offline={self.offline}, text={self.text[:60]!r})"


def choose_provider(name: str = "auto") -> str:
    """``auto`` → anthropic or openai when their key is set, else the offline ``scripted`` provider."""
    if name != "auto":
        return name
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    return "scripted"


def _offline_reviewer(request: Any) -> Any:
    """Scripted replies for workflow agents: the demo's steps, and a main answer built from the prompt."""
    from agentstack_lab.providers.demo import OFFLINE_TAG, demo_reply

    meta = request.metadata or {}
    if meta.get("step") != "main":
        return demo_reply(request)
    prompt = meta.get("prompt") or ""
    items = [ln[2:].strip() for ln in prompt.splitlines() if ln.startswith("- ")]
    if not items:
        return f"{OFFLINE_TAG} Reviewed: nothing to contest. (Offline scripted reviewer; no model was called.)"
    head = "; ".join(items[:3])
    return (f"{OFFLINE_TAG} Reviewed {len(items)} item(s). Most important: {head}. "
            "(Offline scripted reviewer; no model was called.)")


CASSETTE_MODES = ("replay", "record", "new_episodes")


def cassette_options(cassette: str | Path | None, mode: str = "replay", provider: str = "auto") -> dict[str, Any]:
    """``RunOptions`` fields that make a workflow's agents replay or record ``cassette`` ("" = neither).

    Call it once per workflow run (the notebooks do, in their set-up cell): ``record`` starts a fresh
    cassette that every agent of the workflow then appends to (new_episodes against it, so a question
    asked again in a later iteration gets the answer it got the first time, as it will on replay);
    ``replay`` serves every reply from it with no network and no key (a miss stops the workflow);
    ``new_episodes`` replays what it has and records what it lacks.

    Raises:
        UsageError: An unknown ``mode``, or a cassette to replay that does not exist (one line).
    """
    from agentstack_lab.errors import UsageError

    if not cassette:
        return {}
    if mode not in CASSETTE_MODES:
        raise UsageError(f"cassette_mode must be one of {', '.join(CASSETTE_MODES)}, got {mode!r}")
    path = Path(cassette).absolute()
    if mode == "replay":
        if not path.is_file():
            raise UsageError(f"cassette {path} does not exist (record it with cassette_mode='record')")
        return {"replay": str(path)}
    if mode == "record" or not path.exists():
        from agentstack_lab.providers.cassette import FORMAT

        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"cassette": FORMAT, "provider": choose_provider(provider)}
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    return {"replay": str(path), "replay_mode": "new_episodes"}


async def ask_agent(prompt: str, *, provider: str = "auto", agent_type: str = "researcher",
                    workspace: Workspace | None = None, timeout_s: float = 300.0,
                    options: dict[str, Any] | None = None) -> AgentNote:
    """Ask one headless agent (no subagents, no code execution, no questions) and return its note.

    Offline (no key, ``provider="scripted"``) the scripted provider answers deterministically. A
    failure is returned in ``AgentNote.error``; it never stops the workflow, except a request a
    replayed cassette lacks (``options`` from :func:`cassette_options`): the check cannot run as recorded.
    """
    from agentstack_lab.engine import AgentRun, RunOptions
    from agentstack_lab.providers.cassette import CassetteError, CassetteMissError
    from agentstack_lab.workspace import Workspace

    name = choose_provider(provider)
    offline = name == "scripted"
    if offline:
        from agentstack_lab.providers.scripted import ScriptedProvider

        chosen: Any = ScriptedProvider(_offline_reviewer)
    else:
        chosen = name
    ws = workspace or Workspace.open()
    run: Any = None
    try:
        opts = RunOptions(max_depth=0, subagents=False, interactive=False, auto_approve=False,
                          executor="subprocess", final_question=False, timeout_s=timeout_s, **(options or {}))
        run = AgentRun(prompt, workspace=ws, provider=chosen, agent_type=agent_type, options=opts,
                       origin="workflow")
        if opts.replay and opts.replay_mode == "strict":
            name, offline = run.provider.name, True  # replay:anthropic, served from the cassette
        text = await run
        return AgentNote(str(text or ""), name, offline)
    except CassetteError:
        raise
    except Exception as exc:
        misses = getattr(getattr(run, "provider", None), "misses", None)
        if misses:
            raise CassetteMissError(misses[0]) from None
        return AgentNote("", name, offline, error=f"{type(exc).__name__}: {exc}")
    finally:
        if workspace is None:
            ws.close()
