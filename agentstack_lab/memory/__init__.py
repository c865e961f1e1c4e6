"""Workspace memory: entries with keyword and vector indexes (SQLite, or PostgreSQL + pgvector for a team), hybrid search and session isolation."""

from agentstack_lab.memory.access import AccessContext, AccessDeniedError, can_access_entry, derive_namespace
from agentstack_lab.memory.api import Entry, Memory, MemoryValidationError, SearchResult
from agentstack_lab.memory.search import EmbedderFailedError, SearchHits
from agentstack_lab.memory.sessions import Session, SessionAccessError, SessionError, Sessions
from agentstack_lab.memory.vectors import EmbedderMismatchError

__all__ = ["AccessContext", "AccessDeniedError", "EmbedderFailedError", "EmbedderMismatchError", "Entry", "Memory",
           "MemoryValidationError", "SearchHits", "SearchResult", "Session", "SessionAccessError", "SessionError",
           "Sessions", "can_access_entry", "derive_namespace"]
