"""The workspace's single SQLite file: driver, connection set-up and migrations."""

from agentstack_lab.store.connection import Database, connect

__all__ = ["Database", "connect"]
