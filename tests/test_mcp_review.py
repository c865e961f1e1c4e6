"""The ``review_loop_*`` tools through the real ``mcp`` client against ``agentstack-lab mcp`` over stdio."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mcp")

from tests.test_mcp import call, error, mcp_client  # noqa: E402
from tests.test_review_loop import BUGGY, FAIL, FIXED, PASS  # noqa: E402

pytestmark = pytest.mark.slow


async def test_review_loop_round_trip(workdir):
    async with mcp_client(workdir) as s:
        started = await call(s, "review_loop_start", code=BUGGY, path="calc.py", provider="scripted",
                             script={"verdicts": [FAIL, PASS], "revisions": [FIXED]})
        loop_id = started["loopId"]
        assert started["maxIterations"] == 3 and started["kind"] == "code"
        for _ in range(100):  # it runs on the server's loop; poll like a client would
            status = await call(s, "review_loop_status", loop_id=loop_id[:8])
            if status["done"]:
                break
            await asyncio.sleep(0.1)
        assert (status["status"], status["verdict"], status["iteration"]) == ("passed", "PASS", 2)
        assert [(r["iteration"], r["verdict"], r["findings"]) for r in status["reviews"]] == [(1, "FAIL", 1),
                                                                                            (2, "PASS", 0)]
        issues = await call(s, "review_loop_issues", loop_id=loop_id)
        assert issues["count"] == 1 and issues["issues"][0] == {
            "iteration": 1, "verdict": "FAIL", "severity": "high", "file": "calc.py", "line": 2,
            "claim": "total() divides by len(xs)", "evidence": "return sum(xs) / len(xs)"}
        assert (await call(s, "review_loop_get_code", loop_id=loop_id))["code"] == FIXED

        failed = await call(s, "review_loop_start", code=BUGGY, max_iterations=2, script={"verdicts": [FAIL]},
                            wait=True)
        assert (failed["status"], failed["iteration"]) == ("failed", 2)
        listed = await call(s, "review_loop_list")
        assert [x["id"] for x in listed["loops"]] == [failed["loopId"], loop_id] and listed["active"] == 0
        assert (await call(s, "review_loop_list", status="failed"))["count"] == 1

        bad = await call(s, "review_loop_start", code=BUGGY, wait=True,
                         script={"verdicts": ['{"verdict": "FAIL", "findings": [{"severity": "high"}]}']})
        assert bad["status"] == "error" and "findings[0].claim" in bad["error"]

        # bad input: one line, nothing started
        assert "max_iterations: Input should be less than or equal to 50" in await error(
            s, "review_loop_start", code=BUGGY, max_iterations=99)
        assert (await error(s, "review_loop_status", loop_id="nope-nope")).endswith("no review loop 'nope-nope'")
        assert "already ended (failed)" in await error(s, "review_loop_abort", loop_id=failed["loopId"])
        assert "unknown agent type 'critic'" in await error(s, "review_loop_start", code=BUGGY,
                                                            reviewer_type="critic")
        assert (await call(s, "review_loop_list"))["count"] == 3


async def test_abort_through_mcp_stops_a_loop_of_another_process(workdir):
    """A notebook-like process runs a slow loop; the MCP client sees it running and aborts it."""
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        from agentstack_lab.providers.demo import demo_reply
        from agentstack_lab.providers.scripted import ScriptedProvider
        from agentstack_lab.workspace import Workspace
        from agentstack_lab.workflows.review_loop import ReviewLoops

        async def slow(request):
            if request.metadata.get("step") != "main":
                return demo_reply(request)
            print("reviewing", flush=True)
            await asyncio.sleep(120)
            return json.dumps({json.dumps(PASS)})

        async def main():
            with Workspace.open({str(workdir)!r}, announce=False) as ws:
                loop = ReviewLoops(ws).start({BUGGY!r}, path="calc.py", provider=ScriptedProvider(slow))
                print(loop.id, flush=True)
                print((await loop).status, flush=True)

        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=workdir, stdout=subprocess.PIPE, text=True)
    try:
        loop_id = proc.stdout.readline().strip()
        assert proc.stdout.readline().strip() == "reviewing"
        async with mcp_client(workdir) as s:
            running = await call(s, "review_loop_list", status="running")
            assert [x["id"] for x in running["loops"]] == [loop_id] and running["active"] == 1
            assert (await call(s, "review_loop_get_code", loop_id=loop_id))["code"] == BUGGY
            assert (await call(s, "review_loop_abort", loop_id=loop_id))["abortRequested"] is True
            assert proc.stdout.readline().strip() == "aborted"
            assert proc.wait(20) == 0
            assert (await call(s, "review_loop_status", loop_id=loop_id))["status"] == "aborted"
    finally:
        proc.kill()
