"""The broker against upstreams that answer with malformed HTTP (issue 13, point 6).

Each case is a real TCP server on 127.0.0.1 (tests/_broker/rawkit.py)
sending bytes no well-behaved server sends. The broker must answer with a
documented :class:`BrokerError` subclass naming the plugin and what to do,
or a well-formed response; never an exception of httpx, h11, ssl or the
standard library (the red team's ``302 Location: http:x`` raised
``httpx.InvalidURL`` out of ``host.call``). tests/_broker/test_http_fuzz.py
generates such answers; this file pins the ones that were seen to escape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from caplet._broker._http import HttpBroker
from caplet._broker._model import HttpRequest
from caplet._errors import (
    BrokerError,
    InvalidUrlError,
    RedirectError,
    ResponseError,
    TlsError,
)
from tests._broker.conftest import Harness, Pki, grant
from tests._broker.rawkit import RawServer, raw_server

PLUGIN = "fetcher"


@pytest.fixture
def raw() -> Iterator[RawServer]:
    with raw_server() as server:
        yield server


@pytest.fixture
def raw_tls(pki: Pki) -> Iterator[RawServer]:
    with raw_server(pki.server_context()) as server:
        yield server


def _fetch(harness: Harness, server: RawServer, scheme: str = "http", path: str = "/a") -> object:
    url = f"{scheme}://api.example.test:{server.port}"
    grants = [grant(f"net.http:{url}")]
    return harness.broker().fetch(PLUGIN, grants, HttpRequest(url + path))


def _redirect(location: bytes, status: int = 302) -> bytes:
    return (
        f"HTTP/1.1 {status} Found\r\n".encode()
        + b"Location: "
        + location
        + b"\r\nContent-Length: 0\r\n\r\n"
    )


def _ok(body: bytes = b"done") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


# -- Location values httpx itself refused to parse ---------------------------------------------


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_scheme_relative_location_is_followed_by_caplets_rules(
    harness: Harness, raw: RawServer, raw_tls: RawServer, scheme: str
) -> None:
    """``http:x`` is a relative reference to a same-scheme base (RFC 3986 5.2.2, non-strict;
    the WHATWG URL Standard reads it the same way): the broker follows it to ``/x``.
    httpx parsed it into an absolute URL without a host and raised InvalidURL."""
    server = raw if scheme == "http" else raw_tls
    server.answer(_redirect(f"{scheme}:x".encode()))
    with pytest.raises(RedirectError) as exc:
        _fetch(harness, server, scheme)
    # Every hop answers with the same redirect, so the chain loops back to /x.
    assert str(exc.value) == (
        f"redirect loop: plugin 'fetcher', GET {scheme}://api.example.test:{server.port}/x: "
        "the redirects lead back to a URL already requested; fix the server's redirect chain"
    )
    assert [head.split(b" ")[1] for head in server.heads] == [b"/a", b"/x"]


def test_location_with_backslashes_is_refused_naming_the_location(
    harness: Harness, raw: RawServer
) -> None:
    raw.answer(_redirect(b"http:\\\\127.0.0.1/"))
    with pytest.raises(InvalidUrlError) as exc:
        _fetch(harness, raw)
    assert str(exc.value) == (
        f"blocked by policy: plugin 'fetcher', GET http://api.example.test:{raw.port}/a: the "
        "server redirected (status 302) to Location 'http:\\\\\\\\127.0.0.1/', which caplet "
        "refuses: the URL contains a backslash; the redirect was not followed (the server must "
        "send a Location that is a plain http(s) URL or path; request the final URL directly)"
    )
    assert len(raw.heads) == 1
    assert harness.decisions[-1].outcome == "blocked by policy"
    assert harness.decisions[-1].hop == 1


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        (b"/a\t//other.example.test/", "control, invisible or whitespace character U+0009"),
        (b"/a b", "the URL contains a control, invisible or whitespace character U+0020"),
        (b"/\xc2\xa0", "the URL contains a control, invisible or whitespace character U+00A0"),
        (b"https:x", "only absolute http:// and https:// URLs are allowed"),
        (b"//u:p@api.example.test/", "the URL contains credentials"),
        (b"http://[::1", "the URL does not parse"),
        (b"/%zz", "the URL contains a '%' that does not start a two-digit hex escape"),
    ],
)
def test_unusable_locations_are_refused(
    harness: Harness, raw: RawServer, location: bytes, reason: str
) -> None:
    """The raw Location is checked before it is resolved: the standard library's urljoin
    silently drops tabs, which would hide what the server sent. (h11 strips the spaces
    and tabs around a header value, RFC 9110 5.5, and refuses other control bytes.)"""
    raw.answer(_redirect(location))
    with pytest.raises(InvalidUrlError) as exc:
        _fetch(harness, raw)
    message = str(exc.value)
    assert message.startswith(
        f"blocked by policy: plugin 'fetcher', GET http://api.example.test:{raw.port}/a: "
        "the server redirected (status 302) to Location "
    )
    assert reason in message
    assert len(raw.heads) == 1


def test_two_location_headers_are_refused(harness: Harness, raw: RawServer) -> None:
    raw.answer(b"HTTP/1.1 302 Found\r\nLocation: /x\r\nLocation: /y\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(RedirectError) as exc:
        _fetch(harness, raw)
    assert str(exc.value) == (
        f"redirect refused: plugin 'fetcher', GET http://api.example.test:{raw.port}/a: the "
        "server redirected (status 302) with 2 Location headers, so where it leads is "
        "ambiguous; fix the server's redirect"
    )


def test_a_non_ascii_content_length_is_not_taken_for_a_number(
    harness: Harness, raw: RawServer
) -> None:
    """``'²'.isdigit()`` is True and ``int('²')`` raises: h11 refuses the header first,
    and the broker no longer relies on it."""
    raw.answer(b"HTTP/1.1 200 OK\r\nContent-Length: \xc2\xb2\r\n\r\nxx")
    with pytest.raises(ResponseError) as exc:
        _fetch(harness, raw)
    assert "the server's response is not valid HTTP/1.1" in str(exc.value)


def test_tls_garbage_is_a_tls_error(harness: Harness, raw: RawServer) -> None:
    raw.answer(b"\x15\x03\x03\x00\x02\x02\x28" + b"garbage" * 10)
    with pytest.raises(TlsError) as exc:
        _fetch(harness, raw, "https")
    assert str(exc.value).startswith(
        f"TLS error: plugin 'fetcher', GET https://api.example.test:{raw.port}/a: the TLS "
        "handshake failed ("
    )


def test_tls_closed_mid_body_is_an_error_of_the_broker(
    harness: Harness, raw_tls: RawServer
) -> None:
    raw_tls.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
    with pytest.raises(BrokerError) as exc:
        _fetch(harness, raw_tls, "https")
    assert type(exc.value) in (ResponseError, TlsError)
    assert exc.value.category in ("invalid response", "TLS error")


def test_a_well_formed_answer_is_returned(harness: Harness, raw: RawServer) -> None:
    raw.answer(_ok(b"fine"))
    response = _fetch(harness, raw)
    assert getattr(response, "body", None) == b"fine"


def test_a_bug_of_the_broker_is_an_internal_error_not_a_foreign_one(
    harness: Harness,
    raw: RawServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The net under fetch: nothing the tests can send reaches it (test_http_fuzz.py asserts
    so), so a bug is injected where the exchange starts."""

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("/secret/host/path")

    monkeypatch.setattr(HttpBroker, "_send", broken)
    with caplog.at_level(logging.ERROR, logger="caplet"), pytest.raises(BrokerError) as exc:
        _fetch(harness, raw)
    assert type(exc.value) is BrokerError
    assert exc.value.category == "internal error"
    assert str(exc.value) == (
        "internal error: plugin 'fetcher', GET: the broker failed unexpectedly (KeyError); the "
        "host logged the details; report it as a caplet bug, with that log"
    )
    assert isinstance(exc.value.__cause__, KeyError)
    assert harness.decisions[-1].outcome == "internal error"
    assert harness.decisions[-1].allowed is False
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.getMessage() == "the HTTP broker failed on a fetch of plugin 'fetcher'"
