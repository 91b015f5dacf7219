"""Choosing the provider implementation for some settings (or for the environment).

The implementations are imported only when a provider is actually built, so
``caplet list`` and a static-only audit never pay for importing httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never

from caplet._audit._provider import (
    AuditorProvider,
    ProviderKind,
    ProviderSettings,
    Sleep,
    settings_from_env,
)

__all__ = ["provider_from_env", "provider_from_settings"]


def provider_from_settings(
    settings: ProviderSettings, *, sleep: Sleep | None = None
) -> AuditorProvider:
    """The provider speaking ``settings.kind``'s API (``sleep`` as for the providers)."""
    import time

    wait = sleep if sleep is not None else time.sleep
    if settings.kind is ProviderKind.OPENAI:
        from caplet._audit._openai import OpenAIProvider

        return OpenAIProvider(settings, sleep=wait)
    elif settings.kind is ProviderKind.ANTHROPIC:
        from caplet._audit._anthropic import AnthropicProvider

        return AnthropicProvider(settings, sleep=wait)
    else:
        assert_never(settings.kind)


def provider_from_env(environ: Mapping[str, str] | None = None) -> AuditorProvider | None:
    """The provider ``CAPLET_LLM_*`` describe, or ``None`` (static-only) when unset."""
    settings = settings_from_env(environ)
    return None if settings is None else provider_from_settings(settings)
