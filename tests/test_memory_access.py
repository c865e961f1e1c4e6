import logging

import pytest

from agentstack_lab.memory import AccessDeniedError, SessionError
from agentstack_lab.memory.access import (
    AccessContext,
    can_access_entry,
    derive_namespace,
    extract_session_id,
    validate_access,
)


def test_access_helpers():
    a = AccessContext(session_id="A", agent_id="x")
    assert derive_namespace(a) == "session:A" and derive_namespace(None) == "default"
    assert derive_namespace(a, "team") == "team" and extract_session_id("session:A") == "A"
    assert can_access_entry(a, "session:A", "x") and can_access_entry(a, "team", None)
    assert not can_access_entry(a, "session:B", "x") and not can_access_entry(a, "session:A", "y")
    assert not can_access_entry(AccessContext("A", "x", include_shared=False), "team", None)
    assert not can_access_entry(None, "session:A")
    validate_access(a, "session:A", "read")
    with pytest.raises(AccessDeniedError):
        validate_access(a, "session:B", "read")


def test_cross_session_access_denied_and_logged(ws, caplog):
    a, b = ws.sessions.start("a"), ws.sessions.start("b")
    ma, mb = ws.memory.scoped(a.id), ws.memory.scoped(b.id)
    ma.store("secret", "only for session a")
    assert ma.get("secret").namespace == f"session:{a.id}"
    with caplog.at_level(logging.WARNING, logger="agentstack_lab"):
        for op in (lambda: mb.get("secret", namespace=a.namespace),
                   lambda: mb.store("x", "y", namespace=a.namespace),
                   lambda: mb.delete("secret", namespace=a.namespace),
                   lambda: mb.search("secret", namespace=a.namespace),
                   lambda: mb.list(namespace=a.namespace),
                   lambda: ws.memory.get("secret", namespace=a.namespace)):
            with pytest.raises(AccessDeniedError, match="belongs to another session"):
                op()
    assert sum("memory access denied" in r.getMessage() for r in caplog.records) == 6
    for mode in ("fts", "vector", "hybrid"):   # searches without a namespace never see other sessions
        assert mb.search("only for session a", mode) == []
        assert ws.memory.search("only for session a", mode) == []
        assert [r.key for r in ma.search("only for session a", mode)] == ["secret"]
    assert mb.list() == [] and ma.get("secret").content == "only for session a"


def test_session_end_removes_exactly_its_namespace(ws):
    s1, s2 = ws.sessions.start("one"), ws.sessions.start("two")
    m1, m2 = ws.memory.scoped(s1.id), ws.memory.scoped(s2.id)
    ws.memory.store("shared", "shared knowledge")
    m1.store_many([(f"k{i}", f"session one note {i}") for i in range(70)])
    m1.store("tagged", "with tags", tags=["t"])
    m1.store("tagged", "with tags v2")                 # leaves a version row
    m2.store("keep", "session two note")
    db = ws.memory.db   # the workspace file, or the team's PostgreSQL
    rid = db.query("SELECT rid FROM memory WHERE key = 'tagged'")[0][0]
    with db.transaction() as conn:
        conn.execute("INSERT INTO memory_relationships (from_rid, to_rid, type, created_at) VALUES (?, ?, 'x', 0)",
                     (rid, db.query("SELECT rid FROM memory WHERE key = 'shared'")[0][0]))
    assert ws.sessions.status(s1.id).entries == 71
    ended = ws.sessions.end(s1.id)
    assert ended.status == "ended" and ended.entries == 71 and ended.ended_at
    q = lambda sql: db.query(sql)[0][0]  # noqa: E731
    assert q(f"SELECT count(*) FROM memory WHERE namespace = 'session:{s1.id}'") == 0
    assert q("SELECT count(*) FROM memory") == 2
    assert q("SELECT count(*) FROM memory_tags") == 0 and q("SELECT count(*) FROM memory_versions") == 0
    assert q("SELECT count(*) FROM memory_relationships") == 0
    assert ws.memory.stats() == {"memory": 2, "fts": 2, "vector": 2}
    assert m2.get("keep").content == "session two note" and ws.memory.get("shared")
    assert [s.id for s in ws.sessions.active()] == [s2.id]
    with pytest.raises(SessionError, match="already ended"):
        ws.sessions.end(s1.id)
    with pytest.raises(SessionError, match="no session"):
        ws.sessions.end("nope")


def test_agent_view_cannot_read_history_or_purge_another_agents_entries(ws):
    s = ws.sessions.start("agents")
    x, y = ws.memory.scoped(s.id, agent_id="x"), ws.memory.scoped(s.id, agent_id="y")
    x.store("plan", "first draft")
    x.store("plan", "second draft")
    y.store("mine", "y's note")
    ws.memory.scoped(s.id).store("common", "shared in the session")
    assert [v["content"] for v in x.history("plan")] == ["first draft"]
    assert y.get("plan") is None and y.history("plan") == []   # history is as private as the entry
    assert y.delete_namespace(s.namespace) == 2                 # its own entry and the shared one
    assert x.get("plan").content == "second draft" and y.get("mine") is None
    assert ws.memory.scoped(s.id).get("common") is None
