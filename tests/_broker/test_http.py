"""The HTTP broker against real HTTP(S) servers on 127.0.0.1 (issue 6, point 2)."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import wsgiref.simple_server
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet._broker._http import HttpBroker
from caplet._broker._model import BrokerDecision, HttpRequest, HttpResponse
from caplet._broker._policy import NetworkPolicy
from caplet._capabilities._model import NetHttpCapability
from caplet._capabilities._parse import parse_capability
from caplet._errors import (
    BlockedByPolicyError,
    BrokerError,
    ConnectionFailedError,
    DnsError,
    FetchTimeoutError,
    InvalidUrlError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)
from caplet._watchdog import SocketWatchdog
from tests._broker.conftest import (
    TEST_POLICY,
    CountingResolver,
    Harness,
    RunningServer,
    grant,
)
from tests._broker.rawkit import raw_server

PLUGIN = "fetcher"


def _api(server: RunningServer, scheme: str = "https") -> str:
    return f"{scheme}://api.example.test:{server.port}"


def _grants(server: RunningServer, *texts: str) -> list[NetHttpCapability]:
    return [grant(text.format(port=server.port)) for text in texts]


def _echo(response: HttpResponse) -> dict[str, object]:
    document = response.json()
    assert isinstance(document, dict)
    return document


def _headers(response: HttpResponse) -> dict[str, str]:
    document = _echo(response)
    pairs = document["headers"]
    assert isinstance(pairs, list)
    return {str(name).lower(): str(value) for name, value in pairs}


def _refusal(exc: pytest.ExceptionInfo[BrokerError]) -> str:
    message = str(exc.value)
    # No message ever names a resolved address.
    for address in ("127.0.0.1", "127.0.0.2", "10.0.0.1", "169.254.169.254"):
        assert address not in message
    return message


# -- the happy path and the no-second-lookup rule -------------------------------------------


def test_get_reaches_the_server_through_the_checked_address(
    harness: Harness, https_server: RunningServer
) -> None:
    broker = harness.broker()
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    response = broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/echo?q=1"))
    assert response.status == 200
    assert response.url == f"{_api(https_server)}/echo?q=1"
    headers = _headers(response)
    # The Host header names the host (the URL on the wire held the address).
    assert headers["host"] == f"api.example.test:{https_server.port}"
    assert headers["accept-encoding"] == "identity"
    assert headers["user-agent"].startswith("caplet/")
    # api.example.test resolves nowhere but in the test resolver: the broker
    # connected to the address it checked, looked up exactly once.
    assert harness.resolver.lookups == ["api.example.test"]
    plaintext = (
        len(b"HTTP/1.1 200 OK\r\n")
        + sum(len(name) + len(value) + 4 for name, value in response.headers)
        + 2
        + len(response.body)
    )
    (decision,) = harness.decisions
    # Over TLS what is received is what crossed the wire: the handshake and the
    # records around the plaintext too (attack22), a few kilobytes here.
    assert plaintext < decision.received_bytes < plaintext + 5_000
    assert harness.decisions == [
        BrokerDecision(
            at=1_700_000_000.0,
            plugin=PLUGIN,
            method="GET",
            url=f"{_api(https_server)}/echo?...",
            allowed=True,
            outcome="status 200",
            capability=f"net.http:https://api.example.test:{https_server.port}",
            # The request's and the response's heads count too (red team round 19).
            sent_bytes=len(b"GET /echo?q=1 HTTP/1.1\r\n")
            + sum(len(name) + len(value) + 4 for name, value in headers.items())
            + 2,
            received_bytes=decision.received_bytes,
        )
    ]
    assert response.body, "the metrics count bytes that crossed: a body came back"


def test_post_sends_body_and_method(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    response = harness.broker().fetch(
        PLUGIN,
        grants,
        HttpRequest(
            f"{_api(https_server)}/echo",
            method="post",
            headers=(("Content-Type", "text/plain"),),
            body=b"hello",
        ),
    )
    document = _echo(response)
    assert document["method"] == "POST"
    assert document["body"] == "hello"


def test_default_policy_refuses_loopback(harness: Harness, https_server: RunningServer) -> None:
    broker = harness.broker(NetworkPolicy())
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/echo"))
    message = _refusal(exc)
    assert message.startswith(
        f"blocked by policy: plugin 'fetcher', GET {_api(https_server)}/echo: "
        f"host 'api.example.test' resolves to a loopback address"
    )
    assert "NetworkPolicy.allowed_networks" in message
    assert https_server.seen == []
    assert harness.decisions[0].allowed is False
    assert harness.decisions[0].outcome == "blocked by policy"


def test_a_single_blocked_address_among_the_answers_refuses(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://mixed.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://mixed.example.test:{https_server.port}/")
        )
    assert "host 'mixed.example.test' resolves to a private address" in _refusal(exc)
    assert https_server.seen == []


def test_metadata_address_stays_blocked_when_its_network_is_allowed(
    harness: Harness, https_server: RunningServer
) -> None:
    policy = NetworkPolicy(allowed_networks=(ipaddress.ip_network("169.254.0.0/16"),))
    grants = _grants(https_server, "net.http:https://meta.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker(policy).fetch(
            PLUGIN, grants, HttpRequest(f"https://meta.example.test:{https_server.port}/")
        )
    assert "resolves to a cloud metadata address" in _refusal(exc)


def test_second_checked_address_is_tried_when_the_first_refuses(
    harness: Harness, https_server: RunningServer
) -> None:
    # 127.0.0.2 has no listener on this port: refused before anything is sent. The port
    # is held there, bound and not listening, so that no test running beside this one
    # (xdist) listens on it by chance.
    grants = _grants(https_server, "net.http:https://fallback.example.test:{port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.2", https_server.port))
        response = harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://fallback.example.test:{https_server.port}/echo")
        )
    assert response.status == 200
    assert len(https_server.seen) == 1


# -- URL rules --------------------------------------------------------------------------------


def test_trailing_dot_and_case_are_normalised(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    response = harness.broker().fetch(
        PLUGIN, grants, HttpRequest(f"HTTPS://API.Example.Test.:{https_server.port}/echo")
    )
    assert _headers(response)["host"] == f"api.example.test:{https_server.port}"


def test_internationalised_host_is_idna_encoded(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://xn--bcher-kva.example.test:{port}")
    response = harness.broker().fetch(
        PLUGIN, grants, HttpRequest(f"https://Bücher.example.test:{https_server.port}/echo")
    )
    assert _headers(response)["host"] == f"xn--bcher-kva.example.test:{https_server.port}"


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1"])
def test_literal_ip_host_needs_a_capability_naming_it(
    harness: Harness, https_server: RunningServer, host: str
) -> None:
    url = f"https://{host}:{https_server.port}/echo"
    by_name = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, by_name, HttpRequest(url))
    assert "a literal IP host is allowed only when a net.http capability names that address" in (
        str(exc.value)
    )
    # Every numeric spelling is the same address, so a grant naming it covers them all
    # (the certificate has an IP SAN for 127.0.0.1).
    by_ip = _grants(https_server, "net.http:https://127.0.0.1:{port}")
    response = harness.broker().fetch(PLUGIN, by_ip, HttpRequest(url))
    assert response.status == 200
    assert harness.resolver.lookups == []


def test_malformed_numeric_host_is_refused(harness: Harness) -> None:
    with pytest.raises(InvalidUrlError) as exc:
        harness.broker().fetch(PLUGIN, [], HttpRequest("https://1.2.3.4.5/"))
    assert "looks like a numeric IPv4 address but is not a valid one" in str(exc.value)


def test_https_only_unless_the_capability_names_http(
    harness: Harness, http_server: RunningServer
) -> None:
    https_only = _grants(http_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, https_only, HttpRequest(f"{_api(http_server, 'http')}/"))
    assert "scheme 'http' is not approved for host 'api.example.test'" in str(exc.value)
    assert "(https only unless the capability names http)" in str(exc.value)
    plain = _grants(http_server, "net.http:http://api.example.test:{port}")
    response = harness.broker().fetch(PLUGIN, plain, HttpRequest(f"{_api(http_server, 'http')}/"))
    assert response.status == 200


def test_exact_host_means_only_that_host(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://a.example.test:{https_server.port}/")
        )
    message = str(exc.value)
    assert "no approved net.http capability covers host 'a.example.test'" in message
    assert f"(approved: net.http:https://api.example.test:{https_server.port})" in message


def test_wildcard_means_subdomains_not_the_apex(
    harness: Harness, https_server: RunningServer
) -> None:
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, allow_wildcard_hosts=True)
    grants = _grants(https_server, "net.http:https://*.example.test:{port}")
    broker = harness.broker(policy)
    response = broker.fetch(
        PLUGIN, grants, HttpRequest(f"https://a.example.test:{https_server.port}/")
    )
    assert response.status == 200
    with pytest.raises(BlockedByPolicyError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"https://example.test:{https_server.port}/"))
    assert "no approved net.http capability covers host 'example.test'" in str(exc.value)


def test_wildcard_grants_are_off_by_default(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://*.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://a.example.test:{https_server.port}/")
        )
    assert "covered only by a wildcard capability, and the network policy refuses" in str(exc.value)
    assert "NetworkPolicy(allow_wildcard_hosts=True)" in str(exc.value)


def test_port_must_match(harness: Harness, https_server: RunningServer) -> None:
    grants = [grant("net.http:https://api.example.test")]
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/"))
    assert f"port {https_server.port} is not approved for host 'api.example.test'" in str(exc.value)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1", True),
        ("/v1/items?x=1", True),
        ("/v1/a/../b", True),
        ("/v10", False),
        ("/v1/../admin", False),
        ("/v1/%2e%2E/admin", False),
        ("/%76%31/x", True),  # %76%31 is "v1": unreserved characters are decoded first
    ],
)
def test_path_prefix_matches_on_a_segment_boundary(
    harness: Harness, https_server: RunningServer, path: str, allowed: bool
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}/v1")
    request = HttpRequest(f"{_api(https_server)}{path}")
    if allowed:
        assert harness.broker().fetch(PLUGIN, grants, request).status == 200
    else:
        with pytest.raises(BlockedByPolicyError) as exc:
            harness.broker().fetch(PLUGIN, grants, request)
        assert "is outside the approved path prefix ('/v1')" in str(exc.value)


def test_encoded_slash_cannot_leave_a_path_prefix(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}/v1")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/v1/..%2Fadmin"))
    assert "encoded '/' or '\\' (%2F, %5C)" in str(exc.value)


def test_templated_capability_grants_nothing(harness: Harness, https_server: RunningServer) -> None:
    templated = parse_capability("net.http:${config.url}", config_names=["url"])
    assert isinstance(templated, NetHttpCapability)
    assert templated.templated
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, [templated], HttpRequest(f"{_api(https_server)}/"))
    assert "(approved: none)" in str(exc.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@api.example.test/", "the URL contains credentials"),
        ("https://api.example.test/\r\nX-Injected: 1", "control, invisible or whitespace"),
        ("https://api.example.test/a b", "U+0020"),
        ("https://api.example.test/\x00", "U+0000"),
        ("https://api.example.test\\@evil.test/", "backslash"),
        ("file:///etc/passwd", "only absolute http:// and https:// URLs"),
        ("https://%61pi.example.test/", "the host is percent-encoded"),
        ("https://[fe80::1%25eth0]/", "zone ids"),
        ("https://api.example.test:99999/", "invalid port '99999'"),
    ],
)
def test_refused_urls(harness: Harness, url: str, expected: str) -> None:
    with pytest.raises(InvalidUrlError) as exc:
        harness.broker().fetch(PLUGIN, [], HttpRequest(url))
    assert str(exc.value).startswith("blocked by policy: plugin 'fetcher': URL ")
    assert expected in str(exc.value)
    assert harness.decisions[-1].allowed is False
    assert harness.decisions[-1].url == ""


def test_url_length_limit(harness: Harness) -> None:
    policy = NetworkPolicy(max_url_length=50)
    with pytest.raises(InvalidUrlError) as exc:
        harness.broker(policy).fetch(
            PLUGIN, [], HttpRequest("https://api.example.test/" + "a" * 40)
        )
    assert "the URL is 65 characters long; the limit is 50" in str(exc.value)


# -- request checks -----------------------------------------------------------------------------


def test_headers_are_stripped_and_the_drop_is_logged(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    request = HttpRequest(
        f"{_api(https_server)}/echo",
        headers=(
            ("Host", "internal.admin"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("Connection", "close"),
            ("Transfer-Encoding", "chunked"),
            ("Accept-Encoding", "gzip"),
            ("X-Api-Key", "k"),
        ),
    )
    headers = _headers(harness.broker().fetch(PLUGIN, grants, request))
    assert headers["host"] == f"api.example.test:{https_server.port}"
    assert "x-forwarded-for" not in headers
    assert "transfer-encoding" not in headers
    assert headers["accept-encoding"] == "identity"
    assert headers["x-api-key"] == "k"
    assert harness.decisions[-1].detail == (
        "dropped headers: Host, X-Forwarded-For, Connection, Transfer-Encoding, Accept-Encoding"
    )


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\x00b"])
def test_header_injection_is_refused(
    harness: Harness, https_server: RunningServer, value: str
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"{_api(https_server)}/", headers=(("X-A", value),))
        )
    assert "the value of header 'X-A' contains U+00" in str(exc.value)
    assert https_server.seen == []


def test_method_and_body_types_are_checked(harness: Harness) -> None:
    url = "https://api.example.test/"
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, [], HttpRequest(url, method="TRACE"))
    assert "method 'TRACE' is not allowed" in str(exc.value)
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, [], HttpRequest(url, body="text"))  # type: ignore[arg-type]
    assert "the body must be bytes, not str" in str(exc.value)
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, [], HttpRequest(url, timeout_s=-1))
    assert "timeout -1 is not a positive number of seconds" in str(exc.value)


def test_request_size_limit(harness: Harness, https_server: RunningServer) -> None:
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, max_request_bytes=100)
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(SizeLimitError) as exc:
        harness.broker(policy).fetch(
            PLUGIN, grants, HttpRequest(f"{_api(https_server)}/", method="POST", body=b"x" * 100)
        )
    assert str(exc.value).startswith("request too large: plugin 'fetcher', POST ")
    assert "the limit is 100" in str(exc.value)
    assert https_server.seen == []


# -- redirects ----------------------------------------------------------------------------------


def test_same_origin_redirect_keeps_credentials(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    request = HttpRequest(
        f"{_api(https_server)}/redirect/302?to=/echo", headers=(("Authorization", "Bearer t"),)
    )
    response = harness.broker().fetch(PLUGIN, grants, request)
    assert response.url == f"{_api(https_server)}/echo"
    assert _headers(response)["authorization"] == "Bearer t"
    assert [d.hop for d in harness.decisions] == [0, 1]
    assert [d.outcome for d in harness.decisions] == ["status 302", "status 200"]


def test_cross_origin_redirect_drops_credentials_for_good(
    harness: Harness, https_server: RunningServer
) -> None:
    port = https_server.port
    grants = _grants(
        https_server,
        "net.http:https://api.example.test:{port}",
        "net.http:https://other.example.test:{port}",
    )
    # api -> other -> back to api: the credentials do not come back.
    back = f"https://api.example.test:{port}/echo"
    via_other = f"https://other.example.test:{port}/redirect/302?to={back}"
    request = HttpRequest(
        f"{_api(https_server)}/redirect/307?to={via_other}",
        headers=(("Authorization", "Bearer t"), ("Cookie", "s=1"), ("X-Keep", "yes")),
    )
    response = harness.broker().fetch(PLUGIN, grants, request)
    headers = _headers(response)
    assert "authorization" not in headers
    assert "cookie" not in headers
    assert headers["x-keep"] == "yes"
    assert "authorization" not in {k.lower() for k in https_server.seen[1].headers}
    assert https_server.seen[1].headers["Host"] == f"other.example.test:{port}"
    assert harness.decisions[1].detail == "credentials dropped: cross-origin redirect"
    assert harness.resolver.lookups == [
        "api.example.test",
        "other.example.test",
        "api.example.test",
    ]


def test_redirect_loop_is_detected(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(RedirectError) as exc:
        harness.broker().fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/ping"))
    assert str(exc.value).startswith(
        f"redirect loop: plugin 'fetcher', GET {_api(https_server)}/ping: the redirects lead "
        f"back to a URL already requested"
    )
    assert harness.decisions[-1].outcome == "redirect loop"
    assert harness.decisions[-1].hop == 2


def test_five_redirects_are_followed_and_a_sixth_is_refused(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    broker = harness.broker()
    assert broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/chain/5")).text() == (
        "done"
    )
    with pytest.raises(RedirectError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/chain/6"))
    assert "too many redirects: plugin 'fetcher'" in str(exc.value)
    assert "more than 5 redirects" in str(exc.value)


def test_redirect_to_a_blocked_address_is_refused(
    harness: Harness, https_server: RunningServer
) -> None:
    port = https_server.port
    grants = _grants(
        https_server,
        "net.http:https://api.example.test:{port}",
        "net.http:https://meta.example.test:{port}",
    )
    request = HttpRequest(
        f"{_api(https_server)}/redirect/302?to=https://meta.example.test:{port}/latest"
    )
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, grants, request)
    message = _refusal(exc)
    assert (
        f"GET https://meta.example.test:{port}/latest: host 'meta.example.test' resolves to "
        f"a cloud metadata address" in message
    )
    assert len(https_server.seen) == 1
    assert harness.decisions[-1].hop == 1


def test_redirect_to_an_unapproved_host_is_refused(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    request = HttpRequest(
        f"{_api(https_server)}/redirect/302?to=https://other.example.test:{https_server.port}/"
    )
    with pytest.raises(BlockedByPolicyError) as exc:
        harness.broker().fetch(PLUGIN, grants, request)
    assert "no approved net.http capability covers host 'other.example.test'" in str(exc.value)


def test_redirect_with_credentials_in_location_is_refused(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    request = HttpRequest(
        f"{_api(https_server)}/redirect/302?to=https://u:p@api.example.test:{https_server.port}/"
    )
    with pytest.raises(InvalidUrlError) as exc:
        harness.broker().fetch(PLUGIN, grants, request)
    assert "the URL contains credentials" in str(exc.value)


def test_303_turns_post_into_get_and_307_keeps_it(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    broker = harness.broker()
    headers = (("Content-Type", "text/plain"),)
    see_other = broker.fetch(
        PLUGIN,
        grants,
        HttpRequest(f"{_api(https_server)}/redirect/303?to=/echo", "POST", headers, b"data"),
    )
    assert _echo(see_other)["method"] == "GET"
    assert _echo(see_other)["body"] == ""
    assert "content-type" not in _headers(see_other)
    temporary = broker.fetch(
        PLUGIN,
        grants,
        HttpRequest(f"{_api(https_server)}/redirect/307?to=/echo", "POST", headers, b"data"),
    )
    assert _echo(temporary)["method"] == "POST"
    assert _echo(temporary)["body"] == "data"


# -- responses and limits -------------------------------------------------------------------------


def test_response_text_and_json(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    broker = harness.broker()
    data = broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/json"))
    assert data.json() == {"ok": True, "n": [1, 2]}
    assert data.header("CONTENT-TYPE") == "application/json"
    latin = broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/latin1"))
    assert latin.text() == "café"
    with pytest.raises(ResponseError) as exc:
        latin.json()
    assert f"the body from {_api(https_server)}/latin1 is not valid JSON" in str(exc.value)


@pytest.mark.parametrize(
    ("path", "expected"), [("/bytes/2000", "declares 2000 bytes"), ("/stream/2000", "exceeds 1000")]
)
def test_oversize_response_is_refused(
    harness: Harness, https_server: RunningServer, path: str, expected: str
) -> None:
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, max_response_bytes=1000)
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(SizeLimitError) as exc:
        harness.broker(policy).fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}{path}"))
    assert str(exc.value).startswith(
        f"response too large: plugin 'fetcher', GET {_api(https_server)}{path}"
    )
    assert expected in str(exc.value)
    assert harness.decisions[-1].allowed is True
    assert harness.decisions[-1].outcome == "response too large"


def test_the_bytes_of_a_refused_oversize_body_are_reported(
    harness: Harness, https_server: RunningServer
) -> None:
    # Red team (issue 17): a plugin's broker_bytes budget is charged what the decisions
    # report. A body refused for its size has crossed the wire all the same (up to the
    # limit, and the broker's own data budget spends it): reporting 0 let a plugin pull
    # max_response_bytes per request past its byte budget, again and again.
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, max_response_bytes=1000)
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(SizeLimitError):
        harness.broker(policy).fetch(
            PLUGIN, grants, HttpRequest(f"{_api(https_server)}/stream/200000")
        )
    (decision,) = harness.decisions
    assert decision.outcome == "response too large"
    assert decision.received_bytes > 1000, "what was read before the refusal counts"


def test_response_at_the_limit_is_accepted(harness: Harness, https_server: RunningServer) -> None:
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, max_response_bytes=1000)
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    response = harness.broker(policy).fetch(
        PLUGIN, grants, HttpRequest(f"{_api(https_server)}/stream/1000")
    )
    assert response.body == b"y" * 1000


@pytest.mark.parametrize("path", ["/slow", "/slowbody"])
def test_slow_server_times_out(harness: Harness, https_server: RunningServer, path: str) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(FetchTimeoutError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"{_api(https_server)}{path}", timeout_s=0.3)
        )
    assert str(exc.value).startswith(
        f"timed out: plugin 'fetcher', GET {_api(https_server)}{path}: no complete response "
        f"within 0.3 s"
    )
    https_server.release()


def test_watchdog_wakes_a_blocked_read() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(30)  # a safety net: without the watchdog, recv() raises TimeoutError
        watchdog = SocketWatchdog(0.05)
        watchdog.attach(left)
        assert left.recv(1) == b""  # woken by shutdown(), not by data
        watchdog.cancel()
        assert watchdog.fired


def test_wrong_certificate_host_is_a_tls_error(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:https://api.wrong.test:{port}")
    with pytest.raises(TlsError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://api.wrong.test:{https_server.port}/")
        )
    message = _refusal(exc)
    assert message.startswith(
        f"TLS error: plugin 'fetcher', GET https://api.wrong.test:{https_server.port}/: "
        f"the server's certificate was refused (Hostname mismatch"
    )
    assert harness.decisions[-1].allowed is True
    assert harness.decisions[-1].outcome == "TLS error"


def test_untrusted_certificate_is_a_tls_error(
    harness: Harness, https_server: RunningServer
) -> None:
    broker = HttpBroker(TEST_POLICY, resolver=harness.resolver)  # the default CA bundle
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(TlsError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/"))
    assert "the server's certificate was refused (unable to get local issuer certificate)" in (
        str(exc.value)
    )


def test_plain_http_to_a_tls_port_is_a_protocol_error(
    harness: Harness, https_server: RunningServer
) -> None:
    grants = _grants(https_server, "net.http:http://api.example.test:{port}")
    with pytest.raises(BrokerError) as exc:
        harness.broker().fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server, 'http')}/"))
    assert isinstance(exc.value, ResponseError | ConnectionFailedError)
    _refusal(exc)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but not listening: connections to it are refused (RST)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_connection_refused(harness: Harness, closed_port: int) -> None:
    grants = [grant(f"net.http:https://api.example.test:{closed_port}")]
    with pytest.raises(ConnectionFailedError) as exc:
        harness.broker().fetch(
            PLUGIN, grants, HttpRequest(f"https://api.example.test:{closed_port}/")
        )
    assert exc.value.category == "connection refused"
    assert str(exc.value).startswith(
        f"connection refused: plugin 'fetcher', GET https://api.example.test:{closed_port}/: "
        f"the server refused the connection"
    )
    _refusal(exc)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("nowhere.example.test", "'nowhere.example.test' does not resolve"),
        ("empty.example.test", "'empty.example.test' resolved to no address"),
    ],
)
def test_dns_failures_fail_closed(harness: Harness, host: str, expected: str) -> None:
    grants = [grant(f"net.http:https://{host}")]
    with pytest.raises(DnsError) as exc:
        harness.broker().fetch(PLUGIN, grants, HttpRequest(f"https://{host}/"))
    assert str(exc.value).startswith(
        f"DNS resolution failed: plugin 'fetcher', GET https://{host}/: "
    )
    assert expected in str(exc.value)
    assert harness.decisions[-1].outcome == "DNS resolution failed"


class _BrokenResolver(CountingResolver):
    def resolve(
        self, host: str, port: int, *, timeout_s: float
    ) -> tuple[ipaddress.IPv4Address, ...]:
        raise RuntimeError("boom")


def test_a_failing_resolver_fails_closed(harness: Harness) -> None:
    broker = HttpBroker(TEST_POLICY, resolver=_BrokenResolver({}))
    with pytest.raises(DnsError) as exc:
        broker.fetch(
            PLUGIN,
            [grant("net.http:https://api.example.test")],
            HttpRequest("https://api.example.test/"),
        )
    assert "the resolver failed (RuntimeError)" in str(exc.value)


def test_rate_per_minute_and_hour(harness: Harness, https_server: RunningServer) -> None:
    policy = NetworkPolicy(
        allowed_networks=TEST_POLICY.allowed_networks, requests_per_minute=2, requests_per_hour=3
    )
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    broker = harness.broker(policy)
    request = HttpRequest(f"{_api(https_server)}/echo")
    broker.fetch(PLUGIN, grants, request)
    broker.fetch(PLUGIN, grants, request)
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, request)
    assert str(exc.value) == (
        "rate limited: plugin 'fetcher' made 2 requests in the last minute (limit 2 per "
        "minute); retry later, or raise NetworkPolicy.requests_per_minute"
    )
    broker.fetch("another-plugin", grants, request)  # limits are per plugin
    harness.clock.now += 61
    broker.fetch(PLUGIN, grants, request)
    harness.clock.now += 61
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, request)
    assert "made 3 requests in the last hour (limit 3 per hour)" in str(exc.value)
    harness.clock.now += 3600
    assert broker.fetch(PLUGIN, grants, request).status == 200
    assert len(https_server.seen) == 5
    assert [d.outcome for d in harness.decisions].count("rate limited") == 2


def test_data_budget(harness: Harness, http_server: RunningServer) -> None:
    # Plain HTTP: its bytes on the wire are exactly its heads and bodies (over TLS
    # the handshake counts too: tests/_broker/test_http_wire.py).
    policy = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, bytes_per_hour=1000)
    grants = _grants(http_server, "net.http:http://api.example.test:{port}")
    broker = harness.broker(policy)
    assert (
        len(
            broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(http_server, 'http')}/bytes/600")).body
        )
        == 600
    )
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(http_server, 'http')}/bytes/600"))
    assert str(exc.value).startswith("data budget exhausted: plugin 'fetcher', GET ")
    # 400 bytes less both heads of the first exchange (red team round 19).
    assert "bytes left of the plugin's data budget (1000 per hour)" in str(exc.value)
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(http_server, 'http')}/bytes/1"))
    assert exc.value.category == "data budget exhausted"
    assert len(http_server.seen) == 2
    harness.clock.now += 3601
    assert (
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(http_server, 'http')}/bytes/600")).status
        == 200
    )


def test_decision_sink_failure_aborts_the_fetch(
    harness: Harness, https_server: RunningServer
) -> None:
    def sink(decision: BrokerDecision) -> None:
        raise BlockedByPolicyError(f"log unavailable for {decision.plugin}")

    broker = HttpBroker(
        TEST_POLICY,
        resolver=harness.resolver,
        ssl_context=harness.pki.client_context(),
        on_decision=sink,
    )
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    with pytest.raises(BlockedByPolicyError, match="log unavailable for fetcher"):
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_api(https_server)}/echo"))


def test_head_request(harness: Harness, https_server: RunningServer) -> None:
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    response = harness.broker().fetch(
        PLUGIN, grants, HttpRequest(f"{_api(https_server)}/json", method="HEAD")
    )
    assert response.status == 200
    assert response.body == b""
    assert json.loads(response.header("content-length") or "0") == 25


def test_a_wsgi_server_sees_no_client_address_spelled_with_underscores(
    harness: Harness,
) -> None:
    """Red team round 17: the broker drops ``X-Forwarded-For`` and its kin because
    internal services trust them to name the caller; a WSGI server (here the
    standard library's wsgiref, as a Flask or Django app under it would run)
    reads ``X_Forwarded_For`` as the same variable, ``HTTP_X_FORWARDED_FOR``."""
    environs: list[dict[str, str]] = []

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        environs.append({k: v for k, v in environ.items() if k.startswith("HTTP_")})
        start("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    class Quiet(wsgiref.simple_server.WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test asserts on the environ instead."""

    with wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=Quiet) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            port = server.server_address[1]
            response = harness.broker().fetch(
                PLUGIN,
                [grant(f"net.http:http://api.example.test:{port}")],
                HttpRequest(
                    f"http://api.example.test:{port}/",
                    headers=(
                        ("X_Forwarded_For", "10.0.0.1"),
                        ("X-Real_IP", "10.0.0.2"),
                        ("X_Api_Key", "k"),
                    ),
                ),
            )
        finally:
            server.shutdown()
            thread.join()
    assert response.status == 200
    (environ,) = environs
    assert "HTTP_X_FORWARDED_FOR" not in environ
    assert "HTTP_X_REAL_IP" not in environ
    assert environ["HTTP_X_API_KEY"] == "k"  # the near miss: an ordinary name arrives
    assert harness.decisions[-1].detail == "dropped headers: X_Forwarded_For, X-Real_IP"


def test_a_not_modified_answer_is_not_refused_for_the_length_it_declares(
    harness: Harness,
) -> None:
    """Red team round 17 (a legitimate use broken): a 304 to a conditional GET may
    carry the Content-Length of the representation it stands for (RFC 9110 8.6),
    with no body (RFC 9112 6.3), as a HEAD answer may; the broker refused the
    revalidation of any resource over the response limit as "too large"."""
    length = TEST_POLICY.max_response_bytes * 2
    with raw_server() as server:
        server.answer(
            b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: %d\r\n\r\n' % length
        )
        url = f"http://api.example.test:{server.port}"
        response = harness.broker().fetch(
            PLUGIN,
            [grant(f"net.http:{url}")],
            HttpRequest(f"{url}/big", headers=(("If-None-Match", '"v1"'),)),
        )
        assert (response.status, response.body) == (304, b"")
        # The near miss: a 200 declaring the same length is still refused before reading.
        server.answer(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
        with pytest.raises(SizeLimitError) as exc:
            harness.broker().fetch(PLUGIN, [grant(f"net.http:{url}")], HttpRequest(f"{url}/big"))
    assert f"the response declares {length} bytes" in str(exc.value)


def test_a_header_value_with_surrounding_whitespace_is_sent_trimmed(
    harness: Harness, https_server: RunningServer
) -> None:
    """Red team round 17: a value with a leading or trailing space or tab (a token
    read from a file with its trailing space) passed the header check, the broker
    resolved and connected, and h11 then refused to write the request: the plugin
    got "the HTTP library refused the request (LocalProtocolError)", naming no
    header, and the server a connection that sent nothing. A field value never
    includes that whitespace (RFC 9110 5.5); browsers trim it (Fetch's normalize)."""
    grants = _grants(https_server, "net.http:https://api.example.test:{port}")
    request = HttpRequest(
        f"{_api(https_server)}/echo",
        headers=(("Authorization", "Bearer t \t"), ("X-A", " a b"), ("X-Empty", "  ")),
    )
    headers = _headers(harness.broker().fetch(PLUGIN, grants, request))
    assert headers["authorization"] == "Bearer t"
    assert headers["x-a"] == "a b"  # the near miss: whitespace inside a value stays
    assert headers["x-empty"] == ""


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_hosts_proxy_settings_and_netrc_are_never_used(
    harness: Harness,
    http_server: RunningServer,
    https_server: RunningServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    scheme: str,
) -> None:
    """Red team round 17, held: a proxy from the host's environment would resolve the
    name itself (past the address check) and see every request, and ``.netrc`` would
    add the operator's credentials to a plugin's request. The broker sends each hop
    through a transport of its own, ``trust_env=False``."""
    server = http_server if scheme == "http" else https_server
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine api.example.test login operator password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    with raw_server() as proxy:
        proxy.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nproxy")
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        response = harness.broker().fetch(
            PLUGIN,
            [grant(f"net.http:{scheme}://api.example.test:{server.port}")],
            HttpRequest(f"{scheme}://api.example.test:{server.port}/echo"),
        )
        assert proxy.heads == []
    assert "authorization" not in _headers(response)
