"""Database.transaction(): a failed COMMIT rolls back and leaves the connection usable."""

import pytest

from agentstack_lab.store.connection import Database, sqlite


def test_failed_commit_rolls_back_and_closes_the_transaction(tmp_path):
    db = Database(tmp_path / "t.db", migrate=False)
    db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    db.execute("CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER"
               " REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite.IntegrityError):   # the deferred foreign key fails at COMMIT
        with db.transaction() as conn:
            conn.execute("INSERT INTO child (id, parent) VALUES (1, 42)")
    assert not db.conn.in_transaction
    assert db.query("SELECT count(*) FROM child")[0][0] == 0
    with db.transaction() as conn:                # the next transaction starts normally
        conn.execute("INSERT INTO parent (id) VALUES (42)")
        conn.execute("INSERT INTO child (id, parent) VALUES (1, 42)")
    assert db.query("SELECT count(*) FROM child")[0][0] == 1
    db.close()
