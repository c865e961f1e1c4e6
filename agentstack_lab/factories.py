"""Named factories, registered once: what the provider and embedder registries share.

A workspace fills one registry per kind from its plugin hooks, built-ins first; the first
registration of a name wins and a later one is refused, so a plugin cannot silently replace a
built-in (``openai`` the provider, ``hash`` the embedder). The two registries differed only in the
word they use and the error they raise; the checks live here once. This module sits in the
foundation (it imports nothing of the package), beside :mod:`agentstack_lab.validation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

__all__ = ["FactoryRegistry"]

F = TypeVar("F", bound=Callable[..., object])


class FactoryRegistry(Generic[F]):
    """Factories by name. Subclasses set :attr:`kind` (``"provider"``) and :attr:`error` (the class raised)."""

    kind: ClassVar[str]
    error: ClassVar[type[Exception]]

    def __init__(self) -> None:
        self._factories: dict[str, F] = {}

    def register(self, name: str, factory: F) -> None:
        """Add ``factory`` under ``name``; a taken or malformed name raises :attr:`error` naming it."""
        if not isinstance(name, str) or not name.strip():
            raise self.error(f"{'an' if self.kind[0] in 'aeiou' else 'a'} {self.kind} name must be a non-empty "
                             f"string, got {name!r}")
        if not callable(factory):
            raise self.error(f"{self.kind} {name!r}: the factory must be callable, got {type(factory).__name__}")
        if name in self._factories:
            raise self.error(f"{self.kind} {name!r} is already registered")
        self._factories[name] = factory

    def unregister(self, name: str) -> bool:
        """Remove ``name``; True if it was registered."""
        return self._factories.pop(name, None) is not None

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def factory(self, name: str) -> F | None:
        """The factory registered as ``name``, or ``None``."""
        return self._factories.get(name)
