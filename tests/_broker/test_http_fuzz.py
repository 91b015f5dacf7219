"""Property test: whatever an upstream answers, the broker returns a response or a documented error.

A real TCP server on 127.0.0.1 (and a TLS one with the tests' CA,
tests/_broker/rawkit.py) answers every connection with bytes hypothesis
builds from the ways a server can be broken or hostile (issue 13, point 6):

- ``Location`` values: relative, network-path, scheme-only (``http:x``),
  other schemes, backslashes, controls and spaces, IDNA garbage, non-ASCII
  bytes, huge, several, none at all;
- status lines: unknown or out-of-range codes, missing reasons, other
  protocols and versions, garbage, informational answers with nothing after;
- headers: duplicate, conflicting, signed, huge or non-ASCII
  Content-Length, invalid names and value bytes, obsolete line folding,
  header blocks past h11's limit;
- bodies: bogus gzip/deflate/br/zstd content and transfer codings,
  chunked bodies whose sizes lie, are not hex, carry extensions and
  trailers, or end early;
- any answer cut at any byte (an early close);
- TLS: handshake garbage on the TLS port, a plain answer where TLS was
  expected, and every answer above inside a real TLS session.

The broker must return a well-formed :class:`HttpResponse` or raise one of
the :class:`BrokerError` subclasses its ``fetch`` documents, whose message
starts with its category and names the plugin, and which the decision log
recorded. A bare ``BrokerError`` (the broker's net for its own bugs,
category "internal error") fails the property as much as a foreign
exception would.

Budget: ``CAPLET_FUZZ_EXAMPLES`` (tests/_fuzz/budget.py), default 200 plain
and 100 TLS examples per run; every example is at least one real
connection.
"""

from __future__ import annotations

import gzip
import ssl
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from caplet._broker._http import HttpBroker
from caplet._broker._model import BrokerDecision, HttpRequest, HttpResponse
from caplet._broker._urls import parse_url
from caplet._errors import (
    BlockedByPolicyError,
    BrokerError,
    ConnectionFailedError,
    FetchTimeoutError,
    InvalidUrlError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)
from tests._broker.conftest import NAMES, TEST_POLICY, CountingResolver, FakeClock, Pki, grant
from tests._broker.rawkit import RawServer, raw_server
from tests._fuzz.budget import fuzz

PLUGIN = "fetcher"
#: What ``HttpBroker.fetch`` documents; DnsError cannot happen here (every name the
#: test resolver knows is one of its table's).
DOCUMENTED = (
    BlockedByPolicyError,
    InvalidUrlError,
    RateLimitError,
    SizeLimitError,
    ConnectionFailedError,
    TlsError,
    FetchTimeoutError,
    RedirectError,
    ResponseError,
)
#: The tests' policy with a response limit small enough for generated bodies to pass it.
POLICY = replace(TEST_POLICY, max_response_bytes=48)
#: Deadline of one fetch: a safety net only. Every answer ends with the server
#: closing the connection, so no example waits for it.
_TIMEOUT_S = 20.0


@dataclass
class Servers:
    plain: RawServer
    tls: RawServer
    client_context: ssl.SSLContext


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from tests._broker.conftest import make_pki

    pki: Pki = make_pki(tmp_path_factory.mktemp("fuzz-pki"))
    with raw_server() as plain, raw_server(pki.server_context()) as tls:
        yield Servers(plain, tls, pki.client_context())


# -- what a server sends -------------------------------------------------------------------


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_LOCATION_TEXT = st.one_of(
    st.sampled_from(
        [
            "/ok",
            "x",
            "../../../x",
            "?q=1",
            "#frag",
            "",
            "http:",
            "https:",
            "http:x",
            "https:x",
            "http:/x",
            "http:///x",
            "//",
            "///x",
            "//other.example.test/",
            "//api.example.test:1/",
            "//127.0.0.1/",
            "//[::1]/",
            "//[::1",
            "http://[::1",
            "ftp://api.example.test/",
            "javascript:alert(1)",
            "data:text/plain,x",
            "file:///etc/passwd",
            "\\\\127.0.0.1/",
            "http:\\\\127.0.0.1/",
            "/\\x",
            "http://u:p@api.example.test/",
            "http://xn--/",
            "http://xn--zz-.test/",
            "http://xn--a.test/",
            "http://ß.test/",
            "http://\u202eevil.test/",
            "http://a..b/",
            "http://0x7f.1/",
            "http://999999999999/",
            "http://api.example.test:99999/",
            "http://api.example.test:-1/",
            "http://api.example.test:/",
            "/%",
            "/%zz",
            "/%2e%2e/%2e%2e/x",
            "/..;/x",
            "/a b",
            "/a\tb",
            "/\u00a0",
            "/" + "a" * 3000,
            "/" + "a" * 9000,
        ]
    ),
    st.text(max_size=40),
    st.builds(
        lambda scheme, host, path: f"{scheme}{host}{path}",
        st.sampled_from(["http://", "https://", "//", "http:", ""]),
        st.text(st.characters(codec="utf-8"), max_size=12),
        st.text(max_size=12),
    ),
)
LOCATION = st.one_of(
    _LOCATION_TEXT.map(_encoded),
    st.binary(max_size=40),
    st.just(b"/" + b"b" * 70000),  # past h11's header size limit
)

#: Status codes a well-formed answer may carry; redirects first, as they reach the most code.
STATUS_CODES = st.sampled_from([302, 301, 303, 307, 308, 200, 204, 206, 304, 404, 500, 599])
BROKEN_STATUS_LINES = st.one_of(
    st.sampled_from(
        [
            b"HTTP/1.1 100 Continue",
            b"HTTP/1.1 101 Switching Protocols",
            b"HTTP/1.1 199 Odd",
            b"HTTP/1.1 600 Beyond",
            b"HTTP/1.1 999 Max",
            b"HTTP/1.1 000 Zero",
            b"HTTP/1.1 099 Low",
            b"HTTP/1.1 2000 Long",
            b"HTTP/1.1 20 Short",
            b"HTTP/1.1 abc Letters",
            b"HTTP/1.1 302",
            b"HTTP/1.1 302 a\x00b",
            "HTTP/1.1 302 Ünïcödé".encode(),
            b"HTTP/1.0 302 Found",
            b"HTTP/0.9 200 OK",
            b"HTTP/2 200",
            b"HTTP/1.1  302  Found",
            b"ICY 200 OK",
            b"",
            b"\x00\x01\x02",
        ]
    ),
    st.binary(max_size=30),
)
CONTENT_LENGTHS = st.sampled_from(
    [
        *(b"0", b"1", b"5", b"100", b"-1", b"+5", b" 5 ", b"5, 5", b"5,6", b"0x10", b""),
        *(b"\xc2\xb2", b"9" * 30, b"9" * 5000),
    ]
)
#: Headers that are valid HTTP but hostile or odd in what they say.
ODD_HEADERS = st.one_of(
    st.tuples(
        st.just(b"Content-Encoding"),
        st.sampled_from([b"gzip", b"deflate", b"br", b"zstd", b"gzip, br", b"bogus", b"identity"]),
    ),
    st.tuples(st.just(b"Location"), LOCATION),
    st.tuples(st.just(b"Content-Type"), st.sampled_from([b"application/json", b"text/plain"])),
    st.tuples(st.just(b"Set-Cookie"), st.sampled_from([b"a=b", b"a=b; Domain=127.0.0.1"])),
)
#: Headers that break the framing or the syntax.
BROKEN_HEADERS = st.one_of(
    st.tuples(st.just(b"Content-Length"), CONTENT_LENGTHS),
    st.tuples(
        st.just(b"Transfer-Encoding"),
        st.sampled_from(
            [b"chunked", b"gzip, chunked", b"chunked, gzip", b"chunked, chunked", b"bogus", b""]
        ),
    ),
    st.tuples(
        st.sampled_from(
            [b"X-Ok", b"Bad Name", b"Bad:Name", b"", b"\xff\xfe", b"X\x00Y", b" Lead", b"X-Ok "]
        ),
        st.sampled_from([b"v", b"", b"a\x00b", b"a\rb", b"\xff", b"x" * 200]),
    ),
)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A body as encoded content, and the framing header that goes with it."""
    data = draw(st.one_of(st.binary(max_size=64), st.just(b"z" * (POLICY.max_response_bytes + 1))))
    kind = draw(st.sampled_from(["raw", "gzip", "bogus-gzip", "deflate", "bogus-br", "chunked"]))
    if kind == "gzip":
        data = gzip.compress(data)
    elif kind == "bogus-gzip":
        data = b"\x1f\x8b\x08\x00" + data
    elif kind == "deflate":
        data = zlib.compress(data)
    elif kind == "bogus-br":
        data = b"\xce\xb2\xcf\x81" + data
    elif kind == "chunked":
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        return chunked, b"Transfer-Encoding: chunked"
    return data, b"Content-Length: %d" % len(data)


@st.composite
def lying_chunks(draw: st.DrawFn) -> bytes:
    """A chunked body whose sizes lie, are not hex, or that ends early."""
    data = draw(st.binary(min_size=1, max_size=64))
    size = draw(st.sampled_from([b"%x" % (len(data) + 7), b"%x" % (len(data) - 1), b"0"]))
    size = draw(st.sampled_from([size, b"zz", b"-1", b"f" * 20, b"%x;ext=1" % len(data)]))
    tail = draw(st.sampled_from([b"\r\n0\r\n\r\n", b"", b"\r\n", b"\r\n0\r\nTrailer: v\r\n\r\n"]))
    return size + b"\r\n" + data + tail


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """One answer: well-formed HTTP carrying hostile values, with at most a few defects.

    Most answers parse, so the broker's own code (redirects, Location, the
    size checks) sees them, not only h11's refusals.
    """
    status = draw(STATUS_CODES)
    lines = [b"HTTP/1.1 %d Reason" % status]
    headers: list[tuple[bytes, bytes]] = []
    if status in (301, 302, 303, 307, 308) and draw(st.integers(0, 9)):
        headers.append((b"Location", draw(LOCATION)))
    headers += draw(st.lists(ODD_HEADERS, max_size=3))
    body, framing = draw(bodies())
    defects = draw(
        st.sets(
            st.sampled_from(["status", "header", "fold", "separator", "chunks", "cut"]),
            max_size=2,
        )
    )
    if "status" in defects:
        lines[0] = draw(BROKEN_STATUS_LINES)
    if "header" in defects:
        headers.insert(draw(st.integers(0, len(headers))), draw(BROKEN_HEADERS))
    if "chunks" in defects:
        body, framing = draw(lying_chunks()), b"Transfer-Encoding: chunked"
    lines += [name + b": " + value for name, value in headers]
    lines.append(framing)
    if "fold" in defects:  # obs-fold (RFC 9112 5.2): refused or joined, never misread
        index = draw(st.integers(1, len(lines) - 1))
        lines[index] += b"\r\n  folded"
    separator = b"\r\n"
    if "separator" in defects:
        separator = draw(st.sampled_from([b"\n", b"\r", b"\r\r\n", b"\n\r"]))
    raw = separator.join(lines) + separator + separator + body
    if "cut" in defects:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]  # the server closes early
    return raw


TLS_GARBAGE = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda rest: b"\x16\x03\x03\x00\x40" + rest, st.binary(max_size=64)),
    st.builds(lambda rest: b"\x15\x03\x03\x00\x02\x02" + rest, st.binary(max_size=8)),
    answers(),
)


# -- the property ---------------------------------------------------------------------------


def _location_names_loopback(answer: bytes) -> bool:
    """Whether a Location in ``answer`` spells 127.0.0.1 some other way (``0x7f.1``)."""
    for line in answer.replace(b"\r", b"\n").split(b"\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() != b"location":
            continue
        try:
            parsed = parse_url(value.strip().decode("latin-1"), plugin="fetcher", max_length=8192)
        except BrokerError:
            continue
        if parsed.host == "127.0.0.1":
            return True
    return False


def _check(scheme: str, server: RawServer, context: ssl.SSLContext, answer: bytes) -> None:
    server.answer(answer)
    decisions: list[BrokerDecision] = []
    broker = HttpBroker(
        POLICY,
        resolver=CountingResolver(NAMES),
        ssl_context=context,
        clock=FakeClock(),
        wall_clock=lambda: 1_700_000_000.0,
        on_decision=decisions.append,
    )
    base = f"{scheme}://api.example.test:{server.port}"
    grants = [grant(f"net.http:{base}")]
    outcome: HttpResponse | BrokerError
    try:
        outcome = broker.fetch(PLUGIN, grants, HttpRequest(base + "/a", timeout_s=_TIMEOUT_S))
    except DOCUMENTED as exc:
        outcome = exc
    # --hypothesis-show-statistics shows how the answers spread over the outcomes.
    event(type(outcome).__name__)
    assert decisions, "every fetch leaves a decision"
    if isinstance(outcome, BrokerError):
        assert type(outcome) is not BrokerError, outcome  # the net for caplet's own bugs
        message = str(outcome)
        assert message.startswith(f"{outcome.category}: plugin 'fetcher'"), message
        # No message names the address a name resolved to (only a URL's own host,
        # such as a Location's 0x7f.1 normalised to 127.0.0.1, may be quoted).
        if b"127.0.0.1" not in answer and not _location_names_loopback(answer):
            assert "127.0.0.1" not in message.replace(outcome.url, "")
        assert decisions[-1].outcome == outcome.category
        return
    response = outcome
    assert isinstance(response, HttpResponse)
    assert isinstance(response.status, int)
    assert 100 <= response.status <= 999
    assert all(isinstance(n, str) and isinstance(v, str) for n, v in response.headers)
    assert isinstance(response.body, bytes)
    assert response.url.startswith(f"{scheme}://api.example.test:{server.port}/")
    assert decisions[-1].allowed
    assert decisions[-1].outcome == f"status {response.status}"


@fuzz(200)
@given(answer=answers())
@example(answer=b"HTTP/1.1 302 Found\r\nLocation: http:x\r\nContent-Length: 0\r\n\r\n")
@example(answer=b"HTTP/1.1 302 Found\r\nLocation: http:\\\\127.0.0.1/\r\nContent-Length: 0\r\n\r\n")
@example(
    answer=b"HTTP/1.1 302 Reason\r\nLocation: http://0x7f.1/\r\nContent-Length: 49\r\n\r\n"
    + b"z" * 49
)
@example(answer=b"HTTP/1.1 200 OK\r\nContent-Length: \xc2\xb2\r\n\r\nxx")
@example(answer=b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n")
@example(answer=b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nraw bytes")
def test_any_answer_is_a_response_or_a_documented_error(servers: Servers, answer: bytes) -> None:
    _check("http", servers.plain, servers.client_context, answer)


@fuzz(100)
@given(answer=answers())
def test_any_answer_inside_tls_is_a_response_or_a_documented_error(
    servers: Servers, answer: bytes
) -> None:
    _check("https", servers.tls, servers.client_context, answer)


@fuzz(100)
@given(garbage=TLS_GARBAGE)
@example(garbage=b"")
@example(garbage=b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
def test_tls_garbage_is_a_tls_or_connection_error(servers: Servers, garbage: bytes) -> None:
    """An https fetch whose server does not speak TLS: never a response."""
    servers.plain.answer(garbage)
    broker = HttpBroker(
        TEST_POLICY,
        resolver=CountingResolver(NAMES),
        ssl_context=servers.client_context,
        clock=FakeClock(),
    )
    base = f"https://api.example.test:{servers.plain.port}"
    with pytest.raises(BrokerError) as exc:
        broker.fetch(PLUGIN, [grant(f"net.http:{base}")], HttpRequest(base + "/a"))
    assert type(exc.value) in (TlsError, ConnectionFailedError, ResponseError), exc.value
    assert str(exc.value).startswith(f"{exc.value.category}: plugin 'fetcher', GET {base}/a: ")
