"""attack36: a review's server identity (steer35's ``api_root``) against the URL caplet
really asks: two servers whose identities compared equal."""

from __future__ import annotations

import pytest

from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import (
    ProviderKind,
    ProviderSettings,
    api_root,
    provider_endpoint,
    settings_from_env,
)
from caplet._errors import AuditConfigError
from tests._audit.llm_server import LLMServer, Reply

#: What follows the base URL and changes what is asked, though the path before it is one.
SUFFIXES = ("?backend=weak", "?", "?x=/../other", "#", "#frag")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_base_url_with_a_query_or_fragment_is_refused_not_one_identity(
    llm: LLMServer, suffix: str
) -> None:
    """caplet posts to ``<base>/chat/completions``: with ``?backend=weak`` in the base,
    the request was ``/v1?backend=weak/chat/completions`` (a gateway that routes by its
    query reached another backend), while the review's identity dropped the query and
    was ``http://127.0.0.1:P/v1``, the configured server's own: an approval given on that
    server's audit carried over on the other backend's. Now such a base is refused where
    it is configured, and names no server anywhere else."""
    base = llm.url + suffix
    assert api_root(base) == ""
    with pytest.raises(AuditConfigError) as caught:
        settings_from_env(
            {
                "CAPLET_LLM_PROVIDER": "openai",
                "CAPLET_LLM_MODEL": "m",
                "CAPLET_LLM_BASE_URL": base,
            }
        )
    message = str(caught.value)
    assert f"base URL {base!r} holds a query or fragment" in message
    assert "appends /chat/completions" in message
    assert "set CAPLET_LLM_BASE_URL to the API root alone" in message

    class AppProvider:
        """An application's provider (``PluginHost(auditor=...)``) naming such a base."""

        endpoint = base

    assert provider_endpoint(AppProvider()) == ""


def test_near_miss_an_api_root_is_asked_at_its_path_and_named_by_it(llm: LLMServer) -> None:
    """An honest base URL (a trailing slash) is asked at ``<path>/chat/completions`` and
    named by that path; an escaped '?' in a path is a path like any other, accepted."""
    settings = ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url=llm.url + "/")
    provider = OpenAIProvider(settings, sleep=lambda _: None)
    llm.script(Reply(text="{}"))
    try:
        assert provider.complete("s", "u").startswith("{")
    finally:
        provider.close()
    assert llm.exchanges[-1].path == "/v1/chat/completions"
    assert provider.endpoint == api_root(llm.url) == llm.url
    escaped = ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url=llm.url + "%3Fx")
    assert escaped.endpoint == llm.url + "%3Fx" != provider.endpoint


def test_an_ipv6_zone_id_is_kept_as_written() -> None:
    """Interface names are case-sensitive (``eth0`` and ``ETH0`` are two interfaces), so
    ``fe80::1`` through each is another server: their identities were one (the whole host
    lowercased). The address itself is still case-free."""
    assert api_root("http://[fe80::1%25eth0]:8000/v1") != api_root(
        "http://[fe80::1%25ETH0]:8000/v1"
    )
    assert api_root("http://[FE80::1%25eth0]:8000/v1") == "http://[fe80::1%25eth0]:8000/v1"
    assert api_root("http://u@[FE80::A%25Eth0]/v1") == "http://[fe80::a%25Eth0]:80/v1"
    assert api_root("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
