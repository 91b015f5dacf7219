"""Fixtures of the audit tests: the scripted LLM server and an OpenAI provider talking to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from tests._audit.llm_server import LLMServer, serve


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    """A scripted LLM server on 127.0.0.1 (both provider APIs)."""
    yield from serve()


@pytest.fixture
def provider(llm: LLMServer) -> Iterator[OpenAIProvider]:
    """An OpenAI-API provider of the scripted server (a test file may define its own)."""
    settings = ProviderSettings(
        kind=ProviderKind.OPENAI, model="test-model", base_url=llm.url, timeout_s=5.0
    )
    provider = OpenAIProvider(settings, sleep=lambda _: None)
    yield provider
    provider.close()
