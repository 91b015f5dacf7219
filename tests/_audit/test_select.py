"""Choosing the provider implementation from settings or the environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from caplet._audit._anthropic import AnthropicProvider
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._audit._select import provider_from_env, provider_from_settings
from caplet._errors import AuditConfigError


@pytest.mark.parametrize(
    ("kind", "cls"),
    [(ProviderKind.OPENAI, OpenAIProvider), (ProviderKind.ANTHROPIC, AnthropicProvider)],
)
def test_provider_from_settings(kind: ProviderKind, cls: type) -> None:
    provider = provider_from_settings(ProviderSettings(kind=kind, model="m"))
    try:
        assert isinstance(provider, cls)
        assert (provider.name, provider.model) == (kind.value, "m")
    finally:
        provider.close()


def test_provider_from_env() -> None:
    assert provider_from_env({}) is None
    provider = provider_from_env(
        {
            "CAPLET_LLM_PROVIDER": "openai",
            "CAPLET_LLM_MODEL": "qwen",
            "CAPLET_LLM_BASE_URL": "http://127.0.0.1:1/v1",
        }
    )
    assert isinstance(provider, OpenAIProvider)
    provider.close()
    with pytest.raises(AuditConfigError, match="CAPLET_LLM_PROVIDER='x' is not a provider"):
        provider_from_env({"CAPLET_LLM_PROVIDER": "x", "CAPLET_LLM_MODEL": "m"})


def test_static_only_never_imports_httpx() -> None:
    code = (
        "import sys, caplet._audit._select, caplet._host._manager, caplet.audit;"
        "assert caplet._audit._select.provider_from_env({}) is None;"
        "print('httpx' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
