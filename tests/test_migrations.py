"""Migrations: unique names, and an upgrade from any earlier release ends in the same schema.

"Any earlier release" is modelled as every prefix of the migration list: a database migrated up to
migration k, closed, then opened by the current code, must end with exactly the schema (tables,
indexes, triggers, virtual tables) of a database created from scratch. And a real workspace file
from an earlier checkout (``tests/golden/workspace_before_split.db.gz``, see its README) opens with
its bookkeeping (``_migrations`` rows, ``user_version``) untouched and nothing re-applied.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from agentstack_lab.store.connection import SQLiteDatabase
from agentstack_lab.store.migrations import MIGRATIONS, applied, migrate
from agentstack_lab.workspace import Workspace

GOLDEN_WORKSPACE = Path(__file__).parent / "golden" / "workspace_before_split.db.gz"
GOLDEN_TEXT = "a workspace file made before store/migrations.py became a package"


def _schema(db: SQLiteDatabase) -> list[tuple[str, str, str]]:
    rows = db.query("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
    return [(r[0], r[1], re.sub(r"\s+", " ", r[2] or "").strip()) for r in rows]


def test_migration_names_are_unique_identifiers():
    names = [name for name, _ in MIGRATIONS]
    assert len(names) == len(set(names)), "duplicate migration names"
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)


def test_registering_a_duplicate_name_is_refused():
    from agentstack_lab.store.migrations import migration

    first = MIGRATIONS[0][1]
    with pytest.raises(ValueError, match="duplicate migration name"):
        migration(first)
    assert len([n for n, _ in MIGRATIONS if n == first.__name__]) == 1


@pytest.fixture(scope="module")
def fresh_schema(tmp_path_factory):
    db = SQLiteDatabase(tmp_path_factory.mktemp("fresh") / "a.db")
    try:
        return _schema(db), applied(db)
    finally:
        db.close()


@pytest.mark.parametrize("k", range(len(MIGRATIONS)))
def test_upgrade_from_every_prefix_ends_in_the_same_schema(tmp_path, fresh_schema, k):
    path = tmp_path / "old.db"
    old = SQLiteDatabase(path, migrate=False)
    migrate(old, upto=k)
    assert applied(old) == [n for n, _ in MIGRATIONS[:k]]
    old.close()

    upgraded = SQLiteDatabase(path)   # the current code opens the old file
    try:
        schema, names = fresh_schema
        assert applied(upgraded) == names
        assert _schema(upgraded) == schema
    finally:
        upgraded.close()


def test_migrating_twice_applies_nothing(tmp_path):
    db = SQLiteDatabase(tmp_path / "a.db")
    try:
        assert migrate(db) == []
    finally:
        db.close()


def make_workspace_file(path: Path) -> None:
    """A workspace file as this checkout writes it (every migration, one memory entry), shrunk to 1 KiB pages.

    It made the golden file (see ``tests/golden/README.md``). The page size and journal mode change the
    file's size only, not its schema or rows.
    """
    with Workspace.open(path, announce=False) as ws:
        ws.memory.store("golden", GOLDEN_TEXT)
    db = SQLiteDatabase(path, migrate=False)
    try:
        db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA page_size = 1024")
        db.execute("VACUUM")
    finally:
        db.close()


def _bookkeeping(path: Path) -> tuple[list[tuple], int, list[tuple]]:
    """``_migrations`` rows (id, name, applied_at), ``user_version`` and the schema text, read without migrating."""
    db = SQLiteDatabase(path, migrate=False)
    try:
        rows = [tuple(r) for r in db.query("SELECT id, name, applied_at FROM _migrations ORDER BY id")]
        (user_version,) = db.query("PRAGMA user_version")[0]
        schema = [tuple(r) for r in db.query("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")]
        return rows, user_version, schema
    finally:
        db.close()


def test_a_workspace_file_made_now_reopens_with_nothing_reapplied(tmp_path):
    path = tmp_path / "a.db"
    make_workspace_file(path)
    before = _bookkeeping(path)
    assert [r[1] for r in before[0]] == [n for n, _ in MIGRATIONS]
    with Workspace.open(path, announce=False) as ws:
        assert ws.memory.get("golden").content == GOLDEN_TEXT
    assert _bookkeeping(path) == before


def test_a_workspace_file_from_an_earlier_checkout_opens_unchanged(tmp_path):
    path = tmp_path / "old.db"
    path.write_bytes(gzip.decompress(GOLDEN_WORKSPACE.read_bytes()))
    rows, user_version, _ = _bookkeeping(path)
    names = [n for n, _ in MIGRATIONS]
    assert [r[1] for r in rows] == names[:len(rows)]   # its migrations are this list's first ones, in this order

    with Workspace.open(path, announce=False) as ws:
        assert ws.memory.get("golden").content == GOLDEN_TEXT
        assert [h.key for h in ws.memory.search("workspace package", mode="fts")] == ["golden"]   # FTS5 index kept
        assert [h.key for h in ws.memory.search(GOLDEN_TEXT, mode="vector")] == ["golden"]        # vectors kept

    after_rows, after_user_version, after_schema = _bookkeeping(path)
    assert after_rows[:len(rows)] == rows            # nothing re-applied: its rows are kept to the byte
    assert [r[1] for r in after_rows[len(rows):]] == names[len(rows):]   # only migrations newer than the file ran
    assert after_user_version == user_version
    fresh = tmp_path / "fresh.db"
    make_workspace_file(fresh)
    assert after_schema == _bookkeeping(fresh)[2]    # the same SQL text as a file made by this checkout
