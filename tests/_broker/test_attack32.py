"""Red-team round 32 (attack32): the broker's headers, against a real WSGI server on 127.0.0.1.

Each attack test failed on main at 7d18d3a3; the near misses show honest use still works.
"""

from __future__ import annotations

import posixpath
import threading
import urllib.parse
import wsgiref.simple_server
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from caplet._broker._model import HttpRequest
from caplet._errors import BlockedByPolicyError, InvalidUrlError
from tests._broker.conftest import Harness, RunningServer, grant

PLUGIN = "fetcher"

#: Headers an authenticating front proxy sets to say who the caller is, the
#: client address families the round-17 table did not list, and method overrides:
#: a service behind such a proxy (or an intranet one in NetworkPolicy.allowed_networks)
#: trusts each of them. The spellings vary on purpose (case, ``_`` for ``-``).
_SPOOFED = (
    ("X-Forwarded-User", "admin"),
    ("X-Forwarded-Email", "admin@corp.example"),
    ("X-Forwarded-Preferred-Username", "admin"),
    ("X-Auth-Request-User", "admin"),
    ("X-WEBAUTH-USER", "admin"),
    ("Remote-User", "admin"),
    ("X_Remote_User", "admin"),
    ("X-Goog-Authenticated-User-Email", "accounts.google.com:admin@corp.example"),
    ("X-Amzn-Oidc-Identity", "admin"),
    ("X-MS-CLIENT-PRINCIPAL-NAME", "admin"),
    ("X-Forwarded-Client-Cert", "By=spiffe://corp/admin"),
    ("X-SSL-Client-Verify", "SUCCESS"),
    ("Ssl-Client-Subject-Dn", "CN=admin"),
    ("X-ARR-ClientCert", "MIIB"),
    ("Forwarded-For", "10.0.0.1"),
    ("X-Forwarded", "for=10.0.0.1"),
    ("X-Original-Forwarded-For", "10.0.0.1"),
    ("X-Envoy-External-Address", "10.0.0.1"),
    ("CF-Connecting-IPv6", "fd00::1"),
    ("X-Appengine-User-Ip", "10.0.0.1"),
    ("X-Azure-ClientIP", "10.0.0.1"),
    ("Fly-Client-IP", "10.0.0.1"),
    ("X-HTTP-Method-Override", "TRACE"),
    ("X-HTTP-Method", "CONNECT"),
    ("X-Method-Override", "TRACE"),
    ("X-Original-URI", "/admin"),
)

#: Honest headers with similar names: they must arrive.
_HONEST = (
    ("X-Api-Key", "k"),
    ("X-Request-Id", "r-1"),
    ("X-Client-Version", "1.2"),
    ("X-User-Agent-Hint", "x"),
    ("Authorization", "Bearer t"),
    ("Remote-Config", "on"),
    ("X-Proxy-Id", "p-1"),
)


def _environ_name(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


@pytest.fixture
def wsgi_server() -> Iterator[tuple[int, list[dict[str, str]]]]:
    """A wsgiref application on 127.0.0.1 that keeps the HTTP_* variables it was given
    (as a Flask or Django application under a WSGI server reads its headers)."""
    environs: list[dict[str, str]] = []

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        environs.append({k: v for k, v in environ.items() if k.startswith("HTTP_")})
        start("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    class Quiet(wsgiref.simple_server.WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests assert on the environ instead."""

    with wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=Quiet) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1], environs
        finally:
            server.shutdown()
            thread.join()


def test_identity_forwarding_and_method_override_headers_never_reach_the_server(
    harness: Harness, wsgi_server: tuple[int, list[dict[str, str]]]
) -> None:
    """attack32: the broker dropped the client-address headers of round 17's table but
    passed the ones an authenticating proxy sets to name the *user* (a service behind
    oauth2-proxy, Grafana's auth proxy, IAP, an ALB or Envoy's mTLS trusts them as a
    login), client-address spellings outside the table, and ``X-HTTP-Method-Override``
    (a POST that a Rails or Express application runs as TRACE, a method the broker
    refuses). A plugin with a grant for such a service logged in as anyone."""
    port, environs = wsgi_server
    response = harness.broker().fetch(
        PLUGIN,
        [grant(f"net.http:http://api.example.test:{port}")],
        HttpRequest(
            f"http://api.example.test:{port}/",
            method="POST",
            headers=(*_SPOOFED, *_HONEST),
            body=b"x",
        ),
    )
    assert response.status == 200
    (environ,) = environs
    arrived = sorted(name for name, _ in _SPOOFED if _environ_name(name) in environ)
    assert arrived == []
    detail = harness.decisions[-1].detail
    assert detail == "dropped headers: " + ", ".join(name for name, _ in _SPOOFED)


def test_a_proxy_header_never_becomes_a_cgi_scripts_http_proxy(
    harness: Harness, wsgi_server: tuple[int, list[dict[str, str]]]
) -> None:
    """attack32 (httpoxy, CVE-2016-5385): the broker dropped ``Proxy-*`` but not
    ``Proxy``, which a CGI or WSGI server names ``HTTP_PROXY``: under CGI that is the
    script's environment, and its own HTTP client (urllib, requests) then sends every
    outbound request, with its credentials, through the proxy the plugin named."""
    port, environs = wsgi_server
    response = harness.broker().fetch(
        PLUGIN,
        [grant(f"net.http:http://api.example.test:{port}")],
        HttpRequest(
            f"http://api.example.test:{port}/",
            headers=(("Proxy", "http://attacker.example:8080"), ("Proxy-Foo", "1")),
        ),
    )
    assert response.status == 200
    (environ,) = environs
    assert "HTTP_PROXY" not in environ
    assert "HTTP_PROXY_FOO" not in environ
    assert harness.decisions[-1].detail == "dropped headers: Proxy, Proxy-Foo"


def test_honest_headers_with_similar_names_still_arrive(
    harness: Harness, wsgi_server: tuple[int, list[dict[str, str]]]
) -> None:
    """The near miss: API keys, request ids, client versions and credentials are sent."""
    port, environs = wsgi_server
    response = harness.broker().fetch(
        PLUGIN,
        [grant(f"net.http:http://api.example.test:{port}")],
        HttpRequest(f"http://api.example.test:{port}/", headers=_HONEST),
    )
    assert response.status == 200
    (environ,) = environs
    assert {name: environ.get(_environ_name(name)) for name, _ in _HONEST} == dict(_HONEST)
    assert "dropped headers" not in harness.decisions[-1].detail


#: The names APIs give their keys (GitLab, Google, Azure API Management, Vault, AWS ...).
_API_KEYS = (
    ("X-Api-Key", "k1"),
    ("Api-Key", "k2"),
    ("Private-Token", "k3"),
    ("X-Auth-Token", "k4"),
    ("X-Goog-Api-Key", "k5"),
    ("Ocp-Apim-Subscription-Key", "k6"),
    ("X-Vault-Token", "k7"),
    ("X-Amz-Security-Token", "k8"),
    ("X_Access_Token", "k9"),
    ("X-Client-Secret", "k10"),
    ("X-CSRF-Token", "k11"),
    ("X-Session-Id", "k12"),
)
#: Headers that carry no secret: they follow the request to the next origin.
_PLAIN = (("Accept", "application/json"), ("X-Keep", "yes"), ("X-Request-Id", "r-1"))


def _seen_names(server: RunningServer, index: int) -> set[str]:
    return {name.lower() for name in server.seen[index].headers}


def test_a_cross_origin_redirect_drops_every_api_key_header(
    harness: Harness, https_server: RunningServer
) -> None:
    """attack32: a cross-origin redirect dropped Authorization, Cookie and
    Proxy-Authorization only; the key most APIs take in a header of their own
    (``X-Api-Key``, ``Private-Token``, ``Ocp-Apim-Subscription-Key`` ...) followed an
    open redirect on one granted origin to another granted origin (a wildcard grant's
    user-content host, say): the user's secret for the first, handed to the second."""
    port = https_server.port
    grants = [
        grant(f"net.http:https://api.example.test:{port}"),
        grant(f"net.http:https://other.example.test:{port}"),
    ]
    to = f"https://other.example.test:{port}/echo"
    response = harness.broker().fetch(
        PLUGIN,
        grants,
        HttpRequest(
            f"https://api.example.test:{port}/redirect/307?to={to}",
            headers=(*_API_KEYS, *_PLAIN),
        ),
    )
    assert response.status == 200
    assert {name.lower() for name, _ in _API_KEYS} <= _seen_names(https_server, 0)
    leaked = sorted({name.lower() for name, _ in _API_KEYS} & _seen_names(https_server, 1))
    assert leaked == []
    assert {name.lower() for name, _ in _PLAIN} <= _seen_names(https_server, 1)
    assert harness.decisions[1].detail == "credentials dropped: cross-origin redirect"


def test_a_same_origin_redirect_keeps_the_api_key(
    harness: Harness, https_server: RunningServer
) -> None:
    """The near miss: a redirect within the origin keeps every header the plugin set."""
    port = https_server.port
    response = harness.broker().fetch(
        PLUGIN,
        [grant(f"net.http:https://api.example.test:{port}")],
        HttpRequest(
            f"https://api.example.test:{port}/redirect/302?to=/echo",
            headers=(*_API_KEYS, *_PLAIN),
        ),
    )
    assert response.status == 200
    assert {name.lower() for name, _ in (*_API_KEYS, *_PLAIN)} <= _seen_names(https_server, 1)
    assert harness.decisions[1].detail == ""


#: What old Tomcat and IIS decoded overlong UTF-8 to (CVE-2008-2938, MS00-078).
_OVERLONG = {
    b"\xc0\xae": b".",
    b"\xe0\x80\xae": b".",
    b"\xc0\xaf": b"/",
    b"\xe0\x80\xaf": b"/",
    b"\xc1\x9c": b"/",  # a backslash, which Windows servers read as '/'
}


def _lenient_segment(segment: str) -> str:
    """One segment as Windows reads it: trailing spaces trimmed, a run of dots at most two."""
    trimmed = segment.rstrip(" ")
    return trimmed[:2] if trimmed and set(trimmed) == {"."} else trimmed


class _LenientPaths(BaseHTTPRequestHandler):
    """A server that reads a path the way lenient ones do: decoded twice (IIS's old
    double decoding), NUL and control characters dropped (Jetty 9.4.37-9.4.42,
    CVE-2021-34429), each segment trimmed (:func:`_lenient_segment`), then dot
    segments resolved. ``/admin`` is private; ``/v1`` is the plugin's."""

    protocol_version = "HTTP/1.1"
    seen: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test asserts on what the server saw instead."""

    def do_GET(self) -> None:
        self.seen.append(self.path)
        raw = urllib.parse.unquote_to_bytes(urllib.parse.unquote(self.path))
        for overlong, meant in _OVERLONG.items():
            raw = raw.replace(overlong, meant)
        path = raw.decode("utf-8", "replace")
        path = "".join(c for c in path if c.isprintable())
        read = posixpath.normpath("/".join(_lenient_segment(s) for s in path.split("/")))
        body = b"private admin page" if read.startswith("/admin") else b"public"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def lenient_server() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_LenientPaths,), {"seen": seen})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1], seen
        finally:
            server.shutdown()
            thread.join()


@pytest.mark.parametrize(
    "path",
    [
        "/v1/..%00/admin",
        "/v1/.%00/..%01/admin",
        "/v1/..%20/admin",
        "/v1/.../admin",
        "/v1/%252e%252e/admin",
        "/v1/%c0%ae%c0%ae/admin",
        "/v1/%e0%80%ae./admin",
    ],
)
def test_a_disguised_dot_segment_cannot_leave_a_path_prefix(
    harness: Harness, lenient_server: tuple[int, list[str]], path: str
) -> None:
    """attack32: round 17 refused ``/v1/..;/admin`` (Tomcat drops ``;params`` before it
    resolves dot segments); the same differential by other characters passed: a
    ``..`` followed by an encoded NUL or control character (Jetty dropped a NUL after
    decoding), a space or a third dot (Windows servers trim them) or encoded twice
    kept the ``/v1`` prefix for the broker and read as ``..`` on the server, which
    served ``/admin`` (main fetched "private admin page" for each); so did a dot in
    overlong UTF-8 (``%C0%AE``), which old Tomcat and IIS decoded."""
    port, seen = lenient_server
    broker = harness.broker()
    grants = [grant(f"net.http:http://api.example.test:{port}/v1")]
    with pytest.raises(InvalidUrlError) as refused:
        broker.fetch(PLUGIN, grants, HttpRequest(f"http://api.example.test:{port}{path}"))
    assert "a path segment is a '.' or '..' disguised" in str(refused.value)
    assert seen == []


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("/v1/report.txt", "/v1/report.txt"),
        ("/v1/.well-known/x", "/v1/.well-known/x"),
        ("/v1/..data/x", "/v1/..data/x"),
        ("/v1/a%20b", "/v1/a%20b"),
        ("/v1/x/%2e%2e/y", "/v1/y"),
    ],
)
def test_dots_and_escapes_in_ordinary_segments_still_pass(
    harness: Harness, lenient_server: tuple[int, list[str]], path: str, sent: str
) -> None:
    """The near miss: names with dots, an encoded space inside a name, and a plain
    encoded ``..`` (resolved by the broker itself, inside the prefix) are fetched."""
    port, seen = lenient_server
    response = harness.broker().fetch(
        PLUGIN,
        [grant(f"net.http:http://api.example.test:{port}/v1")],
        HttpRequest(f"http://api.example.test:{port}{path}"),
    )
    assert (response.status, response.body) == (200, b"public")
    assert seen == [sent]


@pytest.mark.parametrize(
    "path", ["/v1/..%252fadmin", "/v1/..%c0%afadmin", "/v1/..%e0%80%afadmin", "/v1/..%c1%9cadmin"]
)
def test_a_separator_encoded_twice_or_overlong_cannot_leave_a_path_prefix(
    harness: Harness, lenient_server: tuple[int, list[str]], path: str
) -> None:
    """attack32: ``%2F`` and ``%5C`` were refused under a path prefix, the same slash
    encoded twice or in overlong UTF-8 was not: ``/v1/..%252fadmin`` is one segment to
    the broker and ``/v1/../admin`` to a server that decodes twice or overlong forms."""
    port, seen = lenient_server
    with pytest.raises(BlockedByPolicyError) as refused:
        harness.broker().fetch(
            PLUGIN,
            [grant(f"net.http:http://api.example.test:{port}/v1")],
            HttpRequest(f"http://api.example.test:{port}{path}"),
        )
    assert "the path contains an encoded '/' or '\\'" in str(refused.value)
    assert seen == []


def test_an_encoded_separator_passes_a_grant_without_a_path_prefix(
    harness: Harness, lenient_server: tuple[int, list[str]]
) -> None:
    """The near miss: with no prefix to leave, an encoded slash is the server's business,
    and accented names in UTF-8 or Latin-1 escapes pass under a prefix."""
    port, seen = lenient_server
    broker = harness.broker()
    response = broker.fetch(
        PLUGIN,
        [grant(f"net.http:http://api.example.test:{port}")],
        HttpRequest(f"http://api.example.test:{port}/v1/a%252fb"),
    )
    assert response.status == 200
    prefixed = [grant(f"net.http:http://api.example.test:{port}/v1")]
    for path in ("/v1/caf%C3%A9", "/v1/%E9t%E9"):
        url = f"http://api.example.test:{port}{path}"
        assert broker.fetch(PLUGIN, prefixed, HttpRequest(url)).status == 200
    assert seen == ["/v1/a%252fb", "/v1/caf%C3%A9", "/v1/%E9t%E9"]
