"""Fixtures of the audit tests: the scripted LLM server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._audit.llm_server import LLMServer, serve


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    """A scripted LLM server on 127.0.0.1 (both provider APIs)."""
    yield from serve()
