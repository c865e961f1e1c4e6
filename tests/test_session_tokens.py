"""Session tokens (the MCP privacy model) through the Python API: shown once, stored as sha256 only."""

from __future__ import annotations

import hashlib

import pytest

from agentstack_lab.errors import AgentstackError
from agentstack_lab.memory.sessions import SessionAccessError, SessionError


def test_a_private_session_opens_with_its_token_only(ws):
    session, token = ws.sessions.start_private("mine")
    other, other_token = ws.sessions.start_private("theirs")
    assert len(token) == 43 and token != other_token  # 32 random bytes, URL-safe base64
    assert ws.sessions.authorize(session.id, token).id == session.id
    with pytest.raises(SessionAccessError, match=f"session '{session.id}' is private"):
        ws.sessions.authorize(session.id, None)
    for wrong in ("", other_token, token[:-1], token + "x"):
        with pytest.raises(SessionAccessError):
            ws.sessions.authorize(session.id, wrong)
    with pytest.raises(SessionError, match="no session with id 'nope'"):
        ws.sessions.authorize("nope", token)
    stored = ws.db.query("SELECT token_hash FROM sessions WHERE id = ?", [session.id])[0][0]
    assert stored == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(session) and token not in str(session.to_dict())


def test_a_local_session_has_no_token_until_its_owner_issues_one(ws):
    local = ws.sessions.start("cli")
    with pytest.raises(SessionAccessError, match="has no session token"):
        ws.sessions.authorize(local.id, "anything")
    first = ws.sessions.issue_token(local.id)
    assert ws.sessions.authorize(local.id, first).id == local.id
    second = ws.sessions.issue_token(local.id)  # a new token replaces the old one
    with pytest.raises(SessionAccessError, match="wrong session_token"):
        ws.sessions.authorize(local.id, first)
    assert ws.sessions.authorize(local.id, second).status == "active"
    ws.sessions.end(local.id)
    with pytest.raises(SessionError, match="has ended"):
        ws.sessions.issue_token(local.id)
    assert issubclass(SessionAccessError, AgentstackError) and issubclass(SessionAccessError, PermissionError)
