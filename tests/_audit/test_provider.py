"""Provider settings: from the environment, validated, the key never shown."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from caplet._audit._provider import (
    DEFAULT_MAX_PROMPT_CHARS,
    ProviderKind,
    ProviderSettings,
    api_root,
    provider_endpoint,
    settings_from_env,
)
from caplet._errors import AuditConfigError

KEY = "sk-test-0123456789abcdef"


def test_nothing_set_means_static_only() -> None:
    assert settings_from_env({}) is None
    assert settings_from_env({"CAPLET_LLM_PROVIDER": "  ", "CAPLET_LLM_API_KEY": KEY}) is None


def test_ollama_settings() -> None:
    settings = settings_from_env(
        {
            "CAPLET_LLM_PROVIDER": "openai",
            "CAPLET_LLM_BASE_URL": "http://localhost:11434/v1/",
            "CAPLET_LLM_MODEL": "llama3.1:8b",
        }
    )
    assert settings is not None
    assert settings.kind is ProviderKind.OPENAI
    assert settings.model == "llama3.1:8b"
    assert settings.url == "http://localhost:11434/v1"
    assert settings.api_key is None
    assert settings.max_prompt_chars == DEFAULT_MAX_PROMPT_CHARS
    assert settings.label == "openai model llama3.1:8b at http://localhost:11434/v1"


def test_hosted_defaults_and_key() -> None:
    settings = settings_from_env(
        {
            "CAPLET_LLM_PROVIDER": "Anthropic",
            "CAPLET_LLM_MODEL": "claude-test",
            "CAPLET_LLM_API_KEY": KEY,
            "CAPLET_LLM_MAX_PROMPT_CHARS": "5000",
            "CAPLET_LLM_TIMEOUT_S": "2.5",
        }
    )
    assert settings is not None
    assert settings.kind is ProviderKind.ANTHROPIC
    assert settings.url == "https://api.anthropic.com/v1"
    assert settings.api_key == SecretStr(KEY)
    assert settings.max_prompt_chars == 5000
    assert settings.timeout_s == 2.5
    openai = ProviderSettings(kind=ProviderKind.OPENAI, model="m")
    assert openai.url == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"CAPLET_LLM_BASE_URL": "http://localhost:11434/v1"},
            "CAPLET_LLM_BASE_URL is set but CAPLET_LLM_PROVIDER is not; set "
            "CAPLET_LLM_PROVIDER=openai",
        ),
        (
            {"CAPLET_LLM_MODEL": "llama3"},
            "CAPLET_LLM_MODEL is set but CAPLET_LLM_PROVIDER is not",
        ),
        (
            {"CAPLET_LLM_PROVIDER": "gemini", "CAPLET_LLM_MODEL": "x"},
            "CAPLET_LLM_PROVIDER='gemini' is not a provider; set it to openai",
        ),
        (
            {"CAPLET_LLM_PROVIDER": "openai"},
            "CAPLET_LLM_PROVIDER=openai needs a model; set CAPLET_LLM_MODEL",
        ),
        (
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_BASE_URL": "ftp://host/v1",
            },
            "base URL 'ftp://host/v1' is not an http(s) URL; set CAPLET_LLM_BASE_URL",
        ),
        (
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_MAX_PROMPT_CHARS": "lots",
            },
            "CAPLET_LLM_MAX_PROMPT_CHARS='lots' is not a positive whole number",
        ),
        (
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_TIMEOUT_S": "-3",
            },
            "CAPLET_LLM_TIMEOUT_S='-3' is not a positive number; unset it for the default 120",
        ),
        (
            # attack14: a whole number past a float's range raised OverflowError out of
            # math.isfinite (caplet audit: "internal error", exit 70).
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_MAX_PROMPT_CHARS": "9" * 400,
            },
            "CAPLET_LLM_MAX_PROMPT_CHARS='999",
        ),
    ],
)
def test_half_or_bad_configuration_is_refused(env: dict[str, str], expected: str) -> None:
    with pytest.raises(AuditConfigError) as info:
        settings_from_env(env)
    assert expected in str(info.value)


def test_key_is_never_sent_over_plain_http_to_another_host() -> None:
    with pytest.raises(AuditConfigError) as info:
        settings_from_env(
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_BASE_URL": "http://llm.internal:8000/v1",
                "CAPLET_LLM_API_KEY": KEY,
            }
        )
    message = str(info.value)
    assert "refusing to send CAPLET_LLM_API_KEY over plain http to llm.internal" in message
    assert KEY not in message
    for loopback in ("http://127.0.0.1:8000/v1", "http://[::1]:8000/v1", "http://localhost/v1"):
        settings = ProviderSettings(
            kind=ProviderKind.OPENAI, model="m", base_url=loopback, api_key=SecretStr(KEY)
        )
        assert settings.api_key is not None


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("timeout_s", 0.0, "timeout_s must be a positive number of seconds"),
        ("timeout_s", float("nan"), "timeout_s must be a positive number of seconds"),
        ("backoff_base_s", -1.0, "backoff_base_s must be 0 or more"),
        ("max_retries", -1, "max_retries must be 0 or more"),
        ("max_prompt_chars", 0, "max_prompt_chars must be at least 1"),
        ("model", " ", "no model given; set CAPLET_LLM_MODEL"),
    ],
)
def test_settings_are_validated(field: str, value: object, expected: str) -> None:
    arguments: dict[str, object] = {"model": "m", field: value}
    with pytest.raises(AuditConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        ProviderSettings(kind=ProviderKind.OPENAI, **arguments)  # type: ignore[arg-type]


def test_the_key_is_not_in_repr_str_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    settings = ProviderSettings(
        kind=ProviderKind.ANTHROPIC, model="claude-test", api_key=SecretStr(KEY)
    )
    caplog.set_level(logging.DEBUG)
    logging.getLogger("caplet").info("settings: %s / %r", settings, settings)
    for text in (repr(settings), str(settings), settings.label, caplog.text):
        assert KEY not in text
    assert "claude-test" in repr(settings)


def test_a_servers_identity_is_its_api_root() -> None:
    """steer35: where a model answered is part of its review; one server spelled
    otherwise is the same, another host, port, scheme or path is not."""
    assert api_root("http://LOCALHOST:11434/v1/") == "http://localhost:11434/v1"
    assert api_root("https://api.openai.com/v1") == "https://api.openai.com:443/v1"
    assert api_root("https://user:pw@api.openai.com/v1") == "https://api.openai.com:443/v1"
    assert api_root("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    distinct = {
        api_root(url)
        for url in (
            "https://api.openai.com/v1",
            "http://api.openai.com/v1",
            "https://api.openai.com:8443/v1",
            "https://api.openai.com/v2",
            "https://127.0.0.1/v1",
        )
    }
    assert len(distinct) == 5
    assert api_root("ftp://x/v1") == api_root("not a url") == api_root("http://[::1") == ""
    settings = ProviderSettings(kind=ProviderKind.ANTHROPIC, model="c")
    assert settings.endpoint == "https://api.anthropic.com:443/v1"
    assert provider_endpoint(object()) == ""
