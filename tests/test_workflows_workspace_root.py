"""A workflow's agent steps log into the workspace found by walking up to ``agentstack.config.json``.

Run from a subfolder of a project (a notebook in ``notebooks/``, say), a workflow's reviewer and
``ask_agent`` runs must land in the project's one workspace, as ``%agent`` and the CLI do, not in a
new ``.agentstack`` beside the notebook.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

from agentstack_lab.workflows.api import ask_agent


def test_ask_agent_from_a_subfolder_logs_into_the_workspace_of_the_config_file(workdir, monkeypatch):
    (workdir / "agentstack.config.json").write_text("{}\n", "utf-8")
    sub = workdir / "notebooks" / "reports"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    monkeypatch.delenv("AGENTSTACK_CONFIG", raising=False)

    note = asyncio.run(ask_agent("Summarise the findings.", provider="scripted"))

    assert note.offline and note.text
    assert not (sub / ".agentstack").exists() and not (workdir / "notebooks" / ".agentstack").exists()
    db = workdir / ".agentstack" / "agentstack.db"
    with sqlite3.connect(db) as conn:
        prompts = [r[0] for r in conn.execute("SELECT prompt FROM agents WHERE parent_id IS NULL")]
    assert prompts == ["Summarise the findings."], os.listdir(workdir)
