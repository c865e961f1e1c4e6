"""The workspace's single SQLite file: driver, connection set-up and migrations; the ``Database`` protocol."""

from agentstack_lab.store.connection import SQLiteDatabase, connect
from agentstack_lab.store.protocol import Database

__all__ = ["Database", "SQLiteDatabase", "connect"]
