"""What a run cost in US dollars: a price table per provider and model, applied to recorded token usage.

Cost is worked out when a view shows a run (the notebook's tree, the Agents panel, the saved tree,
``agent list``), from the usage the events already carry, never recorded: a price that changes, or
one the config sets, applies to old runs too. Every agent of a run uses the run's model, named by the
root agent's ``metadata.provider`` and ``metadata.model``.

:data:`DEFAULT_PRICES` are public list prices in USD per million tokens, each with the date it was
taken; a model not listed (and every offline or local provider: ``scripted``, ``ollama``, the CLI
agents, replays) has no price, so its cost is "unknown" unless the config's ``prices`` section gives
one. A sum over agents some of which have no known cost is a lower bound, shown as ``≥ $0.0123``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentstack_lab.providers.base import combine_basis

__all__ = ["Price", "Cost", "NO_COST", "PriceTable", "DEFAULT_PRICES", "usd_text", "price_tree", "run_model"]


@dataclass(frozen=True, kw_only=True)
class Price:
    """USD per million tokens; ``cache_read``/``cache_write`` default to the input price when not listed."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    date: str = ""  # when this price was taken (ISO date), or "config" for the workspace's own


def _p(inp: float, out: float, read: float | None, write: float | None, date: str) -> Price:
    return Price(input=inp, output=out, cache_read=read, cache_write=write, date=date)


_ANTHROPIC = "2025-11-24"   # anthropic.com/pricing; cache writes at the 5-minute rate (1.25 x input)
_OPENAI = "2025-08-07"      # openai.com/api/pricing; OpenAI charges no cache writes
DEFAULT_PRICES: Mapping[str, Mapping[str, Price]] = {
    "anthropic": {
        "claude-opus-4-5": _p(5, 25, 0.50, 6.25, _ANTHROPIC),
        "claude-opus-4-1": _p(15, 75, 1.50, 18.75, _ANTHROPIC),
        "claude-opus-4": _p(15, 75, 1.50, 18.75, _ANTHROPIC),
        "claude-sonnet-4-5": _p(3, 15, 0.30, 3.75, _ANTHROPIC),
        "claude-sonnet-4": _p(3, 15, 0.30, 3.75, _ANTHROPIC),
        "claude-3-7-sonnet": _p(3, 15, 0.30, 3.75, _ANTHROPIC),
        "claude-haiku-4-5": _p(1, 5, 0.10, 1.25, _ANTHROPIC),
        "claude-3-5-haiku": _p(0.80, 4, 0.08, 1.00, _ANTHROPIC),
        "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30, _ANTHROPIC),
    },
    "openai": {
        "gpt-5": _p(1.25, 10, 0.125, None, _OPENAI),
        "gpt-5-mini": _p(0.25, 2, 0.025, None, _OPENAI),
        "gpt-5-nano": _p(0.05, 0.40, 0.005, None, _OPENAI),
        "gpt-4.1": _p(2, 8, 0.50, None, _OPENAI),
        "gpt-4.1-mini": _p(0.40, 1.60, 0.10, None, _OPENAI),
        "gpt-4.1-nano": _p(0.10, 0.40, 0.025, None, _OPENAI),
        "gpt-4o": _p(2.50, 10, 1.25, None, _OPENAI),
        "gpt-4o-mini": _p(0.15, 0.60, 0.075, None, _OPENAI),
        "o3": _p(2, 8, 0.50, None, _OPENAI),
        "o4-mini": _p(1.10, 4.40, 0.275, None, _OPENAI),
    },
}

# a dated snapshot or alias of a listed model costs what the model does: claude-sonnet-4-5-20250929,
# gpt-4o-2024-08-06, claude-3-5-haiku-latest (never gpt-4o-audio-preview: another model)
_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


@dataclass(frozen=True, kw_only=True)
class Cost:
    """A cost in USD and how sure it is: the token basis of the usage it came from (``providers/base.py``).

    ``basis``: ``none`` (no model call yet), ``reported``, ``estimated``, ``partial`` (a lower bound: some
    agents' cost is unknown) or ``unknown`` (no price for the model, or the provider reports no usage).
    """

    usd: float | None
    basis: str

    def __add__(self, other: Cost) -> Cost:
        basis = combine_basis(self.basis, other.basis)
        if basis == "unknown":
            return Cost(usd=None, basis=basis)
        return Cost(usd=(self.usd or 0.0) + (other.usd or 0.0), basis=basis)

    @property
    def text(self) -> str:
        """``$0.0123``, ``~$0.0123`` (estimated tokens), ``≥ $0.0123`` (some unknown), ``unknown``; empty for none."""
        if self.basis == "none":
            return ""
        if self.basis == "unknown" or self.usd is None:
            return "unknown"
        return {"estimated": "~", "partial": "≥ "}.get(self.basis, "") + usd_text(self.usd)

    def to_wire(self) -> dict[str, Any]:
        return {"usd": self.usd, "basis": self.basis, "text": self.text}


NO_COST = Cost(usd=0.0, basis="none")


def usd_text(usd: float) -> str:
    """Dollars to 4 decimals below $1 (a model call costs fractions of a cent), to cents above."""
    if usd >= 1:
        return f"${usd:,.2f}"
    if 0 < usd < 0.00005:
        return "<$0.0001"
    return f"${usd:.4f}"


class PriceTable:
    """The shipped prices with the workspace's ``prices`` section over them (per model, or ``"*"``: every model)."""

    def __init__(self, overrides: Mapping[str, Mapping[str, Any]] | None = None):
        self._table: dict[str, dict[str, Price]] = {p: dict(models) for p, models in DEFAULT_PRICES.items()}
        for provider, models in (overrides or {}).items():
            for model, price in models.items():
                self._table.setdefault(provider, {})[model] = price if isinstance(price, Price) else _from_config(price)

    @classmethod
    def from_config(cls, config: Any) -> PriceTable:
        """The table of a workspace :class:`~agentstack_lab.config.Config` (its ``prices`` section)."""
        return cls(getattr(config, "prices", None))

    def lookup(self, provider: str | None, model: str | None) -> Price | None:
        """The price of ``model`` at ``provider``: exact, then its dated snapshot's base name, then ``"*"``."""
        models = self._table.get(provider or "")
        if not models:
            return None
        if model:
            if model in models:
                return models[model]
            base = _SNAPSHOT.sub("", model)
            if base in models:
                return models[base]
        return models.get("*")

    def cost(self, usage: Mapping[str, Any] | None, provider: str | None, model: str | None) -> Cost:
        """The cost of one agent's own usage (wire keys: inputTokens, outputTokens, cacheReadTokens, ...)."""
        usage = usage or {}
        tokens = {k: int(usage.get(k) or usage.get(s) or 0) for k, s in (
            ("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
            ("cacheReadTokens", "cache_read_tokens"), ("cacheWriteTokens", "cache_write_tokens"))}
        basis = str(usage.get("basis") or ("reported" if any(tokens.values()) else "none"))
        if basis == "none":
            return NO_COST
        price = self.lookup(provider, model)
        if price is None or basis == "unknown":
            return Cost(usd=None, basis="unknown")
        read, write = tokens["cacheReadTokens"], tokens["cacheWriteTokens"]
        fresh = max(tokens["inputTokens"] - read - write, 0)  # input tokens count the cached ones too
        usd = (fresh * price.input + read * _or(price.cache_read, price.input)
               + write * _or(price.cache_write, price.input) + tokens["outputTokens"] * price.output) / 1e6
        return Cost(usd=usd, basis=basis)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _from_config(price: Any) -> Price:
    """A :class:`~agentstack_lab.config.PriceConfig` (or a dict of its keys) as a :class:`Price`."""
    data: dict[str, Any] = dict(price) if isinstance(price, Mapping) else vars(price)
    return Price(input=float(data["input"]), output=float(data["output"]), cache_read=data.get("cache_read"),
                 cache_write=data.get("cache_write"), date=data.get("date") or "config")


def run_model(root: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The provider and model a run's root agent recorded (``metadata.provider``, ``metadata.model``)."""
    meta = root.get("metadata")
    if not isinstance(meta, Mapping):
        return None, None
    provider, model = meta.get("provider"), meta.get("model")
    return (provider if isinstance(provider, str) else None), (model if isinstance(model, str) else None)


def price_tree(tree: Any, table: PriceTable, provider: str | None = None, model: str | None = None) -> Any:
    """Give each node of a nested tree snapshot a ``cost`` (its subtree's, as ``usage`` is); returns ``tree``.

    The provider and model are the root's (:func:`run_model`) unless given. A node's own cost is priced
    from its ``ownUsage`` (a leaf without one: from its ``usage``).
    """
    def walk(node: dict[str, Any], provider: str | None, model: str | None) -> Cost:
        if run_model(node)[0]:  # a run's root (or a coordinated subtask's) names its own
            provider, model = run_model(node)
        total = NO_COST
        for child in node.get("children") or []:
            total = total + walk(child, provider, model)
        own = node.get("ownUsage", None if node.get("children") else node.get("usage"))
        total = table.cost(own if isinstance(own, Mapping) else None, provider, model) + total
        node["cost"] = total.to_wire()
        return total

    for root in tree if isinstance(tree, list) else [tree] if tree else []:
        walk(root, provider, model)
    return tree

