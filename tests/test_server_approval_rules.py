"""The server extension's "Always allow code like this": a pending approval says what the rule would match,
``approve {always}`` answers with it (bad input: one line, nothing changed), saved rules are listed and removed."""

from __future__ import annotations

import json

import pytest
import tornado

# pytest-jupyter's fixtures, imported here only (see tests/test_server.py)
from pytest_jupyter.jupyter_core import *  # noqa: E402, F403
from pytest_jupyter.jupyter_server import *  # noqa: E402, F403
from pytest_jupyter.pytest_tornasync import *  # noqa: E402, F403

from agentstack_lab.approval import SavedRules, always_rule
from agentstack_lab.decisions import Decisions
from agentstack_lab.workspace import Workspace
from tests.test_server import _get, jp_server_config  # noqa: F401  (the extension in the server)

pytestmark = pytest.mark.slow   # a Jupyter server (jp_fetch) starts processes


def test_rule_endpoints_need_jupyters_token(jp_fetch, jp_asyncio_loop):
    async def body():
        for method in ("GET", "DELETE"):
            path = ("approval", "rules") if method == "GET" else ("approval", "rules", "x")
            with pytest.raises(tornado.httpclient.HTTPClientError) as info:
                await jp_fetch("agentstack", "api", *path, method=method, headers={"Authorization": ""})
            assert info.value.code == 403
    jp_asyncio_loop.run_until_complete(body())


def test_always_from_the_lab(jp_fetch, jp_asyncio_loop, jp_root_dir):
    async def body():
        with Workspace.open(jp_root_dir, announce=False) as ws:
            ds = Decisions(ws.db)
            d = ds.create(kind="approval", prompt="Run?", code="df2 = df.head()",
                          options={"code": "df2 = df.head()", "classes": ["read_only", "rebinds"]})
            net = ds.create(kind="approval", prompt="Run?", code="requests.get(u)",
                            options={"code": "requests.get(u)", "classes": ["network"]})
            shown = await _get(jp_fetch, f"decisions/{d.id}")
            assert shown["alwaysRule"]["description"] == "allow cells that only do: read_only, rebinds"
            for ref, payload, text in [(d.id, {"always": "team"}, "'always' must be 'session' or 'workspace'"),
                                       (d.id, {"always": "session", "code": "x = 2"}, "not to edited code"),
                                       (net.id, {"always": "session"}, "no rule can be saved")]:
                with pytest.raises(tornado.httpclient.HTTPClientError) as info:
                    await jp_fetch("agentstack", "api", "decisions", ref, "approve", method="POST",
                                   body=json.dumps(payload))
                assert info.value.code == 400 and text in json.loads(info.value.response.body)["message"]
            assert ds.get(d.id).pending and ds.get(net.id).pending   # nothing changed
            done = await _get(jp_fetch, f"decisions/{d.id}/approve", method="POST",
                              body=json.dumps({"always": "workspace"}))
            assert done["answer"] == {"approved": True, "always": "workspace"} and done["surface"] == "lab"
            assert "alwaysRule" not in done   # answered: nothing more to offer

            assert (await _get(jp_fetch, "approval/rules"))["rules"] == []
            rule = SavedRules(ws.db).add(always_rule(["rebinds"], "x = 1"), scope="workspace", created_by="alice")
            (listed,) = (await _get(jp_fetch, "approval/rules"))["rules"]
            assert (listed["id"], listed["scope"], listed["createdBy"]) == (rule.id, "workspace", "alice")
            gone = await _get(jp_fetch, f"approval/rules/{rule.id}", method="DELETE")
            assert gone["id"] == rule.id and SavedRules(ws.db).list() == []
            with pytest.raises(tornado.httpclient.HTTPClientError) as info:
                await jp_fetch("agentstack", "api", "approval", "rules", rule.id, method="DELETE")
            assert info.value.code == 404
    jp_asyncio_loop.run_until_complete(body())
