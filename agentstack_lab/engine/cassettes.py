"""A run's provider wrapped for record or replay (``RunOptions.record`` / ``replay`` / ``replay_mode``).

The whole tree shares one provider object, so wrapping it once here records or replays every agent
— the root, parallel subquestion agents, forks started from Python — without the steps knowing.
Strict replay never builds the real provider: it needs no network and no API key. Secrets are taken
once, when the run is built (values of secret-looking environment variables, the configured API keys
and the real provider's own), and scrubbed from everything written to the cassette before hashing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from agentstack_lab.redaction import redact, secret_values

if TYPE_CHECKING:
    from agentstack_lab.engine.options import RunOptions

__all__ = ["provider_for", "run_secrets"]


def run_secrets(workspace: Any, provider: Any) -> list[str]:
    """Secret values a run must hide: secret-looking env vars, configured API keys, the provider's own."""
    providers = workspace.config.providers
    keys: list[Any] = [providers.anthropic.api_key, providers.openai.api_key, providers.ollama.api_key]
    held = getattr(provider, "secrets", None)  # optional: providers holding a key say so
    if callable(held):
        keys.extend(cast("Iterable[Any]", held()))
    return secret_values([k for k in keys if k is not None])


def provider_for(options: RunOptions, workspace: Any, build: Callable[[], Any]) -> Any:
    """The provider a run uses: ``build()`` as is, or wrapped to record or replay a cassette.

    Raises:
        CassetteError: The replay cassette is unreadable or not a cassette (one line naming the file).
    """
    if options.record is None and options.replay is None:
        return build()
    from agentstack_lab.providers.cassette import RecordingProvider, ReplayProvider

    if options.replay is not None and options.replay_mode == "strict":
        hidden = run_secrets(workspace, None)
        return ReplayProvider(options.replay, redact=lambda text: redact(text, hidden))
    inner = build()
    hidden = run_secrets(workspace, inner)

    def scrub(text: str) -> str:
        return redact(text, hidden)

    if options.replay is not None:
        return ReplayProvider(options.replay, mode="new_episodes", inner=inner, redact=scrub,
                              record_to=options.record)
    assert options.record is not None   # neither is None: returned above
    return RecordingProvider(inner, options.record, redact=scrub)
