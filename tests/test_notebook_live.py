"""A run started WITHOUT --wait keeps the kernel free: it is answered and approved over widget comms.

The test plays the front end: it talks to a real kernel through jupyter_client, follows the
widget models from their comm_open/comm_msg messages, types into the answer box, clicks Send and
Approve (the same comm messages JupyterLab sends), and runs other cells while the agent waits.
"""

from __future__ import annotations

import time

import pytest
from jupyter_client.manager import start_new_kernel

from tests.notebook_helpers import ASKING_PROVIDER

pytestmark = pytest.mark.slow


class FrontEnd:
    def __init__(self, kc):
        self.kc = kc
        self.models: dict[str, dict] = {}
        self.outputs: dict[str, list] = {}

    def _take(self, msg):
        kind, content = msg["msg_type"], msg["content"]
        parent = msg["parent_header"].get("msg_id")
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[content["comm_id"]] = dict(content["data"]["state"])
        elif kind == "comm_msg" and content["comm_id"] in self.models:
            if content["data"].get("method") in ("update", "echo_update"):
                self.models[content["comm_id"]].update(content["data"].get("state", {}))
        elif kind in ("stream", "execute_result", "display_data", "error"):
            self.outputs.setdefault(parent, []).append(content)

    def pump(self, until=lambda: False, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if until():
                return True
            try:
                self._take(self.kc.get_iopub_msg(timeout=0.1))
            except Exception:  # queue.Empty
                pass
        return until()

    def execute(self, code, timeout=30.0):
        started = time.monotonic()
        msg_id = self.kc.execute(code)
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        self.pump(lambda: False, timeout=0.2)  # collect its outputs
        assert reply["content"]["status"] == "ok", self.outputs.get(msg_id)
        return time.monotonic() - started, self.outputs.get(msg_id, [])

    def find(self, cls):
        return [mid for mid, s in self.models.items() if cls in (s.get("_dom_classes") or [])]

    def send(self, comm_id, data):
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def click(self, comm_id):
        self.send(comm_id, {"method": "custom", "content": {"event": "click"}})

    def type(self, comm_id, text):
        self.send(comm_id, {"method": "update", "state": {"value": text}, "buffer_paths": []})


def _text(outputs):
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


def test_background_run_is_answered_and_approved_over_comms(workdir):
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(workdir))
    try:
        fe = FrontEnd(kc)
        fe.execute("%load_ext agentstack_lab\n" + ASKING_PROVIDER)
        elapsed, out = fe.execute("run = %agent --provider @asking --no-subagents What was the best year?\nrun")
        assert elapsed < 10
        assert fe.pump(lambda: fe.find("agentstack-send"), timeout=20), "no answer box appeared"

        # The agent waits for us, and the kernel is free: other cells run meanwhile.
        _, out = fe.execute("print(run.status, run.done, [q.kind for q in run.pending_queries])")
        assert _text(out).strip() == "waiting_user False ['clarification']"

        answer_box, = fe.find("agentstack-answer")
        send, = fe.find("agentstack-send")
        fe.type(answer_box, "2024, please")
        fe.click(send)
        assert fe.pump(lambda: fe.find("agentstack-approve"), timeout=20), "no approval appeared"
        code, = fe.find("agentstack-code")
        assert "answer_year = 2024" in fe.models[code]["value"]

        _, out = fe.execute("print(run.status, 'answer_year' in globals())")
        assert _text(out).strip() == "waiting_user False"  # nothing ran before approval

        approve, = fe.find("agentstack-approve")
        fe.click(approve)
        _, out = fe.execute("result = await run\n"
                            "print(run.status, answer_year)\n"
                            "print(any('2024, please' in repr(r.messages) for r in asking.steps('main')))")
        assert _text(out).split() == ["completed", "2024", "True"]
        _, out = fe.execute("print(result == run.result, result.startswith('The year is'))")
        assert _text(out).split() == ["True", "True"]

        def root_done():
            return any("agentstack-status-completed" in (s.get("_dom_classes") or [])
                       for s in fe.models.values())

        assert fe.pump(root_done, timeout=10)
        results = [fe.models[m]["value"] for m in fe.find("agentstack-result")]
        final = next(v for v in results if "Final answer" in v)
        assert "<strong>2024</strong>" in final and "<script" not in final and "onerror" not in final
        tools = [fe.models[m] for m in fe.find("agentstack-tool") if fe.models[m].get("titles")]
        assert [t["titles"] for t in tools] == [["python ✓ · created answer_year"]]  # the names the call touched

        # A second run waits for approval; its Stop button ends it (and nothing it asked to run ran).
        fe.execute("del answer_year\nrun2 = %agent --provider @asking --no-subagents Again?\nrun2")
        assert fe.pump(lambda: len(fe.find("agentstack-approve")) == 2, timeout=20), "no second approval"
        stop = fe.find("agentstack-stop")[-1]
        assert fe.models[stop]["layout"] and "Stop all" == fe.models[stop]["description"]
        fe.click(stop)  # Stop all asks first
        assert fe.pump(lambda: fe.find("agentstack-stop-confirm"), timeout=10), "no confirmation"
        fe.click(fe.find("agentstack-stop-confirm")[-1])
        _, out = fe.execute("try:\n    await run2\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
                            "print(run2.status, 'answer_year' in globals())")
        assert _text(out).split()[-2:] == ["stopped", "False"]
        assert fe.pump(lambda: any("agentstack-status-stopped" in (s.get("_dom_classes") or [])
                                   for s in fe.models.values()), timeout=10)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
