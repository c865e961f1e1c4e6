"""Migrations: unique names, and an upgrade from any earlier release ends in the same schema.

"Any earlier release" is modelled as every prefix of the migration list: a database migrated up to
migration k, closed, then opened by the current code, must end with exactly the schema (tables,
indexes, triggers, virtual tables) of a database created from scratch.
"""

from __future__ import annotations

import re

import pytest

from agentstack_lab.store.connection import Database
from agentstack_lab.store.migrations import MIGRATIONS, applied, migrate


def _schema(db: Database) -> list[tuple[str, str, str]]:
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
    db = Database(tmp_path_factory.mktemp("fresh") / "a.db")
    try:
        return _schema(db), applied(db)
    finally:
        db.close()


@pytest.mark.parametrize("k", range(len(MIGRATIONS)))
def test_upgrade_from_every_prefix_ends_in_the_same_schema(tmp_path, fresh_schema, k):
    path = tmp_path / "old.db"
    old = Database(path, migrate=False)
    migrate(old, upto=k)
    assert applied(old) == [n for n, _ in MIGRATIONS[:k]]
    old.close()

    upgraded = Database(path)   # the current code opens the old file
    try:
        schema, names = fresh_schema
        assert applied(upgraded) == names
        assert _schema(upgraded) == schema
    finally:
        upgraded.close()


def test_migrating_twice_applies_nothing(tmp_path):
    db = Database(tmp_path / "a.db")
    try:
        assert migrate(db) == []
    finally:
        db.close()
