"""Regression tests from the pre-release review of the engine, providers and notebook layers."""

from __future__ import annotations

import asyncio

import fakes_llm
import pytest

from agentstack_lab.engine import AgentRun, HeadlessQueryError, RunOptions
from agentstack_lab.engine.executors import LiveKernelExecutor
from agentstack_lab.events import AgentCompleted, ErrorEvent
from agentstack_lab.providers.base import UsageEvent
from agentstack_lab.providers.scripted import ScriptedProvider, tool_call
from agentstack_lab.providers.testing import TestModel
from agentstack_lab.workspace import Workspace
from tests.test_engine import brain, check_event_order, last_tool_result

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm


async def test_headless_failure_settles_the_children_before_the_agent_ends(ws):
    """A headless failure ends the failing agent's subtree first, like any other failure."""

    child_running = asyncio.Event()

    async def main(req):
        if req.metadata["prompt"] == "slow child":
            child_running.set()
            await asyncio.sleep(30)
            return "never"
        await child_running.wait()  # the child is running when the root needs its approval
        return [tool_call("python", {"code": "x = 1"})] if last_tool_result(req) is None else "ok"

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(subs={"q": [("slow child", "researcher")]},
                                                                      main=main)),
                   options=RunOptions(interactive=False), executor=LiveKernelExecutor(namespace={}))
    with pytest.raises(HeadlessQueryError):
        await asyncio.wait_for(run.wait(), 10)
    by_agent = check_event_order(run.events)
    child_id = run.agents[run.root_id].subagents[0]
    assert run.agents[child_id].status == "stopped" and run.status == "failed"
    ends = [i for i, e in enumerate(run.events) if isinstance(e, AgentCompleted | ErrorEvent)]
    assert [run.events[i].agent_id for i in ends] == [child_id, run.id]
    assert len(by_agent) == 2


async def test_a_child_cancelled_before_it_started_is_stopped_before_its_parent_ends(ws):
    """The root fails at once (headless approval) while its child has not run a step yet."""
    main = lambda req: [tool_call("python", {"code": "x = 1"})] if last_tool_result(req) is None else "ok"  # noqa: E731
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(subs={"q": [("child", "researcher")]},
                                                                      main=main)),
                   options=RunOptions(interactive=False), executor=LiveKernelExecutor(namespace={}))
    with pytest.raises(HeadlessQueryError) as info:
        await asyncio.wait_for(run.wait(), 10)
    assert info.value.kind == "approval"
    child_id = run.agents[run.root_id].subagents[0]
    ends = [e.agent_id for e in run.events if isinstance(e, AgentCompleted | ErrorEvent)]
    assert ends == [child_id, run.id] and run.agents[child_id].status == "stopped"


async def test_cancelled_stream_consumer_leaves_no_pending_getter(ws):
    """Cancelling a task that iterates ``run.stream()`` cancels its internal queue getter too."""
    started = asyncio.Event()

    async def main(req):
        started.set()
        await asyncio.sleep(30)

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                   options=RunOptions(auto_approve=True, final_question=False), executor=LiveKernelExecutor(namespace={}))

    async def consume():
        async for _ in run.stream():
            pass

    before = asyncio.all_tasks()
    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(0.05)  # the consumer has drained the queue and is parked in asyncio.wait
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    await asyncio.wait_for(run.wait(raise_on_error=False), 10)
    await asyncio.sleep(0)
    leftover = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    assert leftover == [], leftover


async def test_live_executor_timeout_is_a_code_error_not_an_agent_failure():
    """A live run past its timeout comes back as an error result (as in the subprocess executor)."""
    ns: dict = {}
    ex = LiveKernelExecutor(namespace=ns, timeout=0.3)
    res = await ex.run("import time\nfor i in range(1000):\n    n = i\n    time.sleep(0.01)")
    assert res.error is not None and res.error.startswith("TimeoutError: code ran longer than 0.3 s")
    for _ in range(100):  # the worker thread was interrupted, not left running
        if not [t for t in __import__("threading").enumerate() if t.name.startswith("agentstack-code")]:
            break
        await asyncio.sleep(0.02)
    n = ns["n"]
    await asyncio.sleep(0.1)
    assert ns["n"] == n < 999


def test_magic_options_merge_the_line_over_the_agents_config(tmp_path):
    """``%agent`` flags win; anything not given comes from the workspace's ``agents`` config."""
    from agentstack_lab.notebook.args import parse_agent_line
    from agentstack_lab.notebook.magics import _options

    w = Workspace.open(tmp_path / "cfg", announce=False)
    try:
        w.config.agents.max_depth, w.config.agents.auto_approve = 1, True
        opts = _options(parse_agent_line("--max-children 2 --wait q"), w)
        assert (opts.max_depth, opts.max_children, opts.auto_approve, opts.interactive) == (1, 2, True, False)
        assert _options(parse_agent_line("--max-depth 0 q"), w).max_depth == 0
    finally:
        w.close()



class _Metered:
    """Wraps a provider and adds up every usage event it streams."""

    def __init__(self, inner):
        self.inner, self.name, self.total = inner, inner.name, [0, 0]

    async def stream(self, request):
        async for ev in self.inner.stream(request):
            if isinstance(ev, UsageEvent):
                self.total[0] += ev.input_tokens
                self.total[1] += ev.output_tokens
            yield ev


async def test_a_skipped_structured_step_still_charges_its_tokens(ws):
    """Both failed attempts of a structured step were billed: the tree's usage is every token streamed."""
    model = TestModel(subquestions={"subquestions": "not a list"})
    provider = _Metered(model)
    run = AgentRun("q", workspace=ws, provider=provider,
                   options=RunOptions(auto_approve=True, final_question=False), executor=LiveKernelExecutor(namespace={}))
    await run
    assert len(model.steps("subquestions")) == 2
    assert any("subquestions step skipped" in n for n in run.agents[run.root_id].metadata["notes"])
    own = run.tree["ownUsage"]
    assert [own["inputTokens"], own["outputTokens"]] == provider.total and provider.total[0] > 0


def test_tree_status_comes_from_agent_state_not_from_the_error_wording():
    """An error whose text mentions "stop" is still a failure; a stop is announced by its state."""
    from agentstack_lab.events import AgentState
    from agentstack_lab.notebook.tree import TreeState

    t = TreeState()
    t.extend([AgentState(agent_id="a", state={"status": "running"}),
              ErrorEvent(agent_id="a", error="RuntimeError: the pump did not stop"),
              AgentState(agent_id="b", state={"status": "running"}),
              AgentState(agent_id="b", state={"status": "stopped", "error": "stopped by the user"}),
              ErrorEvent(agent_id="b", error="stopped by the user")])
    assert (t.nodes["a"].status, t.nodes["b"].status) == ("failed", "stopped")


def test_sync_embeds_close_the_sdk_clients_they_open(fake_llm):
    """``run_sync`` (what the embedders use) closes the SDK client opened on its short-lived loop."""
    import gc
    import warnings

    from fakes_llm import API_KEY

    from agentstack_lab.providers.registry import get_provider
    from agentstack_lab.providers.support import run_sync

    p = get_provider("openai", api_key=API_KEY, base_url=f"{fake_llm.url}/v1", retry_delay=0.001)
    gc.collect()  # other tests' garbage is not ours to report
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert len(run_sync(p.embed(["alpha"], dimensions=4))[0]) == 4
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
             and ("transport" in str(w.message) or "socket" in str(w.message))]
    assert leaks == []


async def test_wait_timeout_in_agent_code_names_the_agent(ws):
    """``wait(h, timeout=...)`` that runs out says which agent is still working, not a bare TimeoutError."""
    code = "h = fork('slow one')\ntry:\n    wait(h, timeout=0.1)\nexcept TimeoutError as e:\n    msg = str(e)\n"

    async def main(req):
        if req.metadata["prompt"] == "slow one":
            await asyncio.sleep(0.5)
            return "done late"
        return [tool_call("python", {"code": code})] if last_tool_result(req) is None else "ok"

    ns: dict = {}
    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain(main=main)),
                   options=RunOptions(auto_approve=True, final_question=False), executor=LiveKernelExecutor(namespace=ns))
    await asyncio.wait_for(run.wait(), 20)
    assert ns["msg"].startswith("wait(): agent researcher-") and ns["msg"].endswith("is still running after 0.1 s")


@pytest.mark.parametrize("line, message", [("--max-agents 0 hi", "max_agents must be a positive integer"),
                                           ("--timeout -1 hi", "--timeout: expected a finite number of seconds > 0"),
                                           ("--timeout nan hi", "--timeout: expected a finite number of seconds > 0")])
def test_agent_magic_out_of_range_option_is_a_usage_error(line, message):
    """An out-of-range value is one line (UsageError), not a traceback, whether the parser or RunOptions refuses it."""
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "agentstack_lab")
    try:
        with pytest.raises(UsageError, match=message):
            sh.run_line_magic("agent", line)
    finally:
        sh.run_line_magic("unload_ext", "agentstack_lab")
        InteractiveShell.clear_instance()


def test_renaming_an_identity_to_a_taken_name_is_a_clear_error(tmp_path):
    """``update(display_name=...)`` refuses a taken name like ``create`` does, and changes nothing."""
    from agentstack_lab.agents.identity import IdentityService
    from agentstack_lab.agents.registry import AgentRegistry
    from agentstack_lab.store import SQLiteDatabase

    db = SQLiteDatabase(tmp_path / "i.db")
    try:
        ids = IdentityService(db, AgentRegistry())
        ids.create("analyst", display_name="Ana")
        bob = ids.create("coder", display_name="Bob")
        with pytest.raises(ValueError, match="an identity named 'Ana' already exists"):
            ids.update(bob.agent_id, display_name="Ana", description="new")
        after = ids.get(bob.agent_id)
        assert (after.display_name, after.description, after.version) == ("Bob", None, bob.version)
        assert ids.update(bob.agent_id, display_name="Bob", description="same name is fine").description
    finally:
        db.close()


async def test_an_agent_name_clash_does_not_lose_the_run_log(ws):
    """Names are unique in ``agents``; a run whose short name is taken still logs every event and row."""
    from agentstack_lab.agents.spawner import Spawner
    from agentstack_lab.engine.log import read_events

    run = AgentRun("q", workspace=ws, provider=ScriptedProvider(brain()),
                   options=RunOptions(auto_approve=True, final_question=False), executor=LiveKernelExecutor(namespace={}))
    squatter = Spawner(ws.db).spawn("researcher", name=f"researcher-{run.id[:8]}")
    await run
    assert len(read_events(ws.db, run.id)) == len(run.events)
    row = Spawner(ws.db).get(run.id)
    assert row is not None and row.status == "completed" and row.name == f"researcher-{run.id}"
    assert Spawner(ws.db).get_by_name(f"researcher-{run.id[:8]}").id == squatter.id
