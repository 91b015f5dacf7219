"""The HTTP broker: a plugin's only way onto the network (``ctx.http.fetch``).

One fetch, hop by hop (the first request and each redirect):

1. parse and normalise the URL (:mod:`caplet._broker._urls`) and match it
   against the plugin's approved ``net.http`` capabilities;
2. admit it against the plugin's rate and data budget (:mod:`._limits`);
3. resolve the host once (the injectable :class:`~._resolver.Resolver`)
   and refuse if **any** answer is a blocked address (:mod:`._addresses`,
   :class:`~._policy.NetworkPolicy`): a name resolving to a public and a
   private address could otherwise be steered to the private one;
4. connect to a checked address *by number*: the request URL carries the
   IP, the ``Host`` header the name, and httpcore's ``sni_hostname``
   request extension makes TLS send the name and verify the certificate
   against it. Nothing resolves the name a second time, so DNS rebinding
   cannot swap the address after the check;
5. on a redirect, close the response unread and start again at 1 with the
   ``Location`` (at most ``max_redirects``, loops refused, credentials
   dropped for good once the chain leaves the origin).

httpx is used without its conveniences, on purpose: no environment proxies
or ``.netrc`` (``trust_env=False``; a proxy would resolve the name itself),
no automatic redirects, no cookie jar, no connection reuse (a new transport
per hop, so a connection verified for one name never carries a request for
another). The total time limit covers every step; each socket operation
waits at most the time left, and a watchdog shuts the socket down at the
deadline, so a server trickling bytes cannot stretch a fetch past it.

Every hop is reported to ``on_decision`` (the permission log): allowed with
its status, or refused with the error category. Errors are
:class:`~caplet._errors.BrokerError` subclasses whose messages never contain
a resolved address.
"""

from __future__ import annotations

import logging
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from ipaddress import IPv4Address, IPv6Address
from typing import Any, TypeVar

import httpx

from caplet._broker._addresses import IPAddress, classify, connect_address
from caplet._broker._headers import (
    CREDENTIAL_HEADERS,
    header_bytes,
    sanitise_headers,
    without_credentials,
)
from caplet._broker._limits import Clock, RateLimiter
from caplet._broker._messages import broker_error
from caplet._broker._model import BrokerDecision, HttpRequest, HttpResponse
from caplet._broker._policy import NetworkPolicy
from caplet._broker._resolver import Resolver
from caplet._broker._system_resolver import SystemResolver
from caplet._broker._urls import ParsedUrl, match_grant, parse_url, resolve_location
from caplet._capabilities._model import NetHttpCapability
from caplet._errors import (
    BlockedByPolicyError,
    BrokerError,
    CapletError,
    ConnectionFailedError,
    DnsError,
    FetchTimeoutError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)
from caplet._version import __version__

__all__ = ["ALLOWED_METHODS", "INTERNAL_ERROR", "DecisionSink", "HttpBroker"]

logger = logging.getLogger("caplet")

#: TRACE (cross-site tracing) and CONNECT (a raw tunnel past every rule) are refused.
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: Receives one :class:`BrokerDecision` per hop; an exception it raises aborts the fetch.
DecisionSink = Callable[[BrokerDecision], None]

_T = TypeVar("_T", bound=BaseException)
#: The category of a fetch that failed through a bug of caplet's (never the plugin's or
#: the server's doing): a plain BrokerError, so callers need no new class.
INTERNAL_ERROR = "internal error"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
#: What the HTTP stack raises on a broken exchange (httpx maps httpcore's and h11's
#: errors to HTTPError; the others reach through unmapped: a URL or header httpx
#: will not build, a stream used wrongly, the OS's socket and TLS errors, text
#: that does not decode). Each becomes a BrokerError in ``_translate``.
_FOREIGN = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError)


@dataclass(frozen=True, slots=True)
class _Hop:
    """One request of a fetch, as checked."""

    method: str
    url: ParsedUrl
    headers: tuple[tuple[str, str], ...]
    body: bytes
    number: int


@dataclass(frozen=True, slots=True)
class _Answer:
    """A received response: a redirect (``location`` set, body unread) or the final one."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    location: str | None


class _Tally:
    """Body bytes one hop has read so far: a body refused half-way (too large, too slow)
    crossed the wire all the same, and the plugin's ``broker_bytes`` budget is charged
    what the decision reports (red team, issue 17)."""

    __slots__ = ("received",)

    def __init__(self) -> None:
        self.received = 0


class _Deadline:
    """The end of a fetch on the monotonic clock (real time: sockets wait on it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(self._end - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0


class _Watchdog:
    """Shuts the current socket down when the fetch's time is up.

    httpx's timeouts bound each socket operation, not the whole exchange: a
    server sending one header byte just before each read timeout could hold
    the fetch for as long as it likes. ``shutdown()`` from this timer thread
    makes the blocked ``recv()`` return at once (the standard way to wake a
    socket operation in another thread); the broker then reports a timeout.
    """

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired and sock is not None:
                _shutdown(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        self._timer.join()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed: nothing left to wake
        pass


class HttpBroker:
    """Performs brokered HTTP(S) requests for plugins, enforcing the network policy.

    ``resolver`` defaults to the system resolver; ``ssl_context`` to httpx's
    default (certifi's CA bundle, ``SSL_CERT_FILE`` honoured); ``clock`` is
    the monotonic clock of the rate limits and ``wall_clock`` the time
    stamped on decisions (both injectable so tests never sleep);
    ``on_decision`` receives every decision for the permission log. One
    broker serves every plugin (rates and budgets are kept per plugin name)
    and is safe to use from several threads.
    """

    def __init__(
        self,
        policy: NetworkPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        clock: Clock = time.monotonic,
        wall_clock: Clock = time.time,
        on_decision: DecisionSink | None = None,
    ) -> None:
        self.policy = policy if policy is not None else NetworkPolicy()
        self._resolver: Resolver = resolver if resolver is not None else SystemResolver()
        self._ssl_context = ssl_context if ssl_context is not None else httpx.create_ssl_context()
        self._limiter = RateLimiter(self.policy, clock)
        self._wall_clock = wall_clock
        self._on_decision = on_decision

    # -- the one entry point --------------------------------------------------------

    def fetch(
        self, plugin: str, grants: Sequence[NetHttpCapability], request: HttpRequest
    ) -> HttpResponse:
        """Fetch ``request`` for ``plugin`` within its approved ``grants``.

        Returns the final response (after redirects), whatever its status.
        Raises a :class:`~caplet._errors.BrokerError` subclass:
        :class:`~caplet._errors.BlockedByPolicyError` (with
        :class:`~caplet._errors.InvalidUrlError`) for a rule,
        :class:`~caplet._errors.RateLimitError`,
        :class:`~caplet._errors.SizeLimitError`,
        :class:`~caplet._errors.DnsError`,
        :class:`~caplet._errors.ConnectionFailedError`,
        :class:`~caplet._errors.TlsError`,
        :class:`~caplet._errors.FetchTimeoutError`,
        :class:`~caplet._errors.RedirectError` or
        :class:`~caplet._errors.ResponseError`.
        """
        try:
            return self._fetch(plugin, grants, request)
        except CapletError:
            raise
        except Exception as exc:
            # A bug of caplet's, not the plugin's nor the server's: the
            # plugin gets a caplet error (never a foreign exception, which
            # would kill its worker and escape the host's call), the log the
            # traceback. Tests generate hostile answers and assert this
            # never happens (tests/_broker/test_http_fuzz.py).
            logger.exception("the HTTP broker failed on a fetch of plugin %r", plugin)
            method = request.method.upper()[:16] if isinstance(request.method, str) else "?"
            error = broker_error(
                BrokerError,
                plugin=plugin,
                method=method,
                url="",
                reason=f"the broker failed unexpectedly ({type(exc).__name__}); the host "
                "logged the details",
                fix="report it as a caplet bug, with that log",
                category=INTERNAL_ERROR,
            )
            self._record(
                plugin, method, "", hop=0, allowed=False, outcome=INTERNAL_ERROR, detail=str(error)
            )
            raise error from exc

    def _fetch(
        self, plugin: str, grants: Sequence[NetHttpCapability], request: HttpRequest
    ) -> HttpResponse:
        method = request.method.upper() if isinstance(request.method, str) else "?"
        try:
            hop, timeout_s, dropped = self._first_hop(plugin, request)
        except BrokerError as exc:
            self._record(
                plugin,
                method[:16],
                exc.url,
                hop=0,
                allowed=False,
                outcome=exc.category,
                detail=str(exc),
            )
            raise
        deadline = _Deadline(timeout_s)
        watchdog = _Watchdog(timeout_s)
        try:
            return self._follow(
                plugin, grants, hop, dropped=dropped, deadline=deadline, watchdog=watchdog
            )
        finally:
            watchdog.cancel()

    # -- checking the request ---------------------------------------------------------

    def _first_hop(self, plugin: str, request: HttpRequest) -> tuple[_Hop, float, tuple[str, ...]]:
        policy = self.policy
        url = parse_url(request.url, plugin=plugin, max_length=policy.max_url_length)
        shown = url.redacted()

        def refuse(reason: str, fix: str) -> BlockedByPolicyError:
            return broker_error(
                BlockedByPolicyError,
                plugin=plugin,
                method=str(request.method)[:16],
                url=shown,
                reason=reason,
                fix=fix,
            )

        if not isinstance(request.method, str) or request.method.upper() not in ALLOWED_METHODS:
            raise refuse(
                f"method {str(request.method)[:16]!r} is not allowed",
                f"use one of {', '.join(sorted(ALLOWED_METHODS))}",
            )
        method = request.method.upper()
        body = request.body
        if isinstance(body, bytearray | memoryview):
            body = bytes(body)
        if not isinstance(body, bytes):
            raise refuse(
                f"the body must be bytes, not {type(body).__name__}",
                "encode text first (e.g. body=text.encode())",
            )
        timeout = request.timeout_s
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise refuse(
                f"timeout {timeout!r} is not a positive number of seconds",
                f"pass seconds, at most {policy.max_timeout_s:g}",
            )
        sanitised = sanitise_headers(request.headers, plugin=plugin, method=method, url=shown)
        headers = sanitised.headers
        if not any(name.lower() == "user-agent" for name, _ in headers):
            headers = (*headers, ("User-Agent", f"caplet/{__version__}"))
        size = len(body) + header_bytes(headers)
        if size > policy.max_request_bytes:
            raise broker_error(
                SizeLimitError,
                plugin=plugin,
                method=method,
                url=shown,
                reason=f"the request is {size} bytes (body and headers); the limit is "
                f"{policy.max_request_bytes}",
                fix="send less, or raise NetworkPolicy.max_request_bytes",
                category="request too large",
            )
        hop = _Hop(method, url, headers, body, 0)
        return hop, policy.timeout_s(timeout), sanitised.dropped

    # -- following the chain ------------------------------------------------------------

    def _follow(
        self,
        plugin: str,
        grants: Sequence[NetHttpCapability],
        hop: _Hop,
        *,
        dropped: tuple[str, ...],
        deadline: _Deadline,
        watchdog: _Watchdog,
    ) -> HttpResponse:
        seen = {(hop.method, str(hop.url))}
        notes = [f"dropped headers: {', '.join(dropped)}"] if dropped else []
        while True:
            grant_text = ""
            allowed = False
            tally = _Tally()
            try:
                grant = match_grant(
                    hop.url,
                    grants,
                    plugin=plugin,
                    method=hop.method,
                    allow_wildcards=self.policy.allow_wildcard_hosts,
                )
                grant_text = str(grant)
                self._limiter.admit(plugin)
                addresses = self._checked_addresses(plugin, hop, deadline)
                allowed = True
                answer = self._send(plugin, hop, addresses, deadline, watchdog, tally=tally)
            except BrokerError as exc:
                detail = "; ".join([str(exc), *notes])
                self._record(
                    plugin,
                    hop.method,
                    hop.url.redacted(),
                    hop=hop.number,
                    allowed=allowed,
                    outcome=exc.category,
                    detail=detail,
                    capability=grant_text,
                    sent=len(hop.body),
                    received=tally.received,
                )
                raise
            self._record(
                plugin,
                hop.method,
                hop.url.redacted(),
                hop=hop.number,
                allowed=True,
                outcome=f"status {answer.status}",
                detail="; ".join(notes),
                capability=grant_text,
                sent=len(hop.body),
                received=len(answer.body),
            )
            if answer.location is None:
                return HttpResponse(answer.status, answer.headers, answer.body, str(hop.url))
            notes = []
            try:
                hop = self._redirect(plugin, hop, answer, seen, notes)
            except BrokerError as exc:
                self._record(
                    plugin,
                    hop.method,
                    exc.url,
                    hop=hop.number + 1,
                    allowed=False,
                    outcome=exc.category,
                    detail=str(exc),
                )
                raise

    def _redirect(
        self, plugin: str, hop: _Hop, answer: _Answer, seen: set[tuple[str, str]], notes: list[str]
    ) -> _Hop:
        """The next hop for a redirect answer (RFC 9110 15.4), checked for count and loops."""
        location = answer.location or ""
        if hop.number >= self.policy.max_redirects:
            raise broker_error(
                RedirectError,
                plugin=plugin,
                method=hop.method,
                url=hop.url.redacted(),
                reason=f"more than {self.policy.max_redirects} redirects",
                fix="request the final URL directly",
                category="too many redirects",
            )
        url = resolve_location(
            hop.url,
            location,
            plugin=plugin,
            method=hop.method,
            status=answer.status,
            max_length=self.policy.max_url_length,
        )
        method, body, headers = hop.method, hop.body, hop.headers
        if (answer.status == 303 and method != "HEAD") or (
            answer.status in (301, 302) and method == "POST"
        ):
            # RFC 9110 15.4.4 (303), and 15.4.2/15.4.3's note on POST: what
            # every browser does. The body goes, and the headers describing it.
            method, body = "GET", b""
            headers = tuple((n, v) for n, v in headers if not n.lower().startswith("content-"))
        if (method, str(url)) in seen:
            raise broker_error(
                RedirectError,
                plugin=plugin,
                method=method,
                url=url.redacted(),
                reason="the redirects lead back to a URL already requested",
                fix="fix the server's redirect chain",
                category="redirect loop",
            )
        seen.add((method, str(url)))
        if url.origin != hop.url.origin and any(
            n.lower() in CREDENTIAL_HEADERS for n, _ in headers
        ):
            headers = without_credentials(headers)
            notes.append("credentials dropped: cross-origin redirect")
        return replace(
            hop, method=method, url=url, headers=headers, body=body, number=hop.number + 1
        )

    # -- addresses -----------------------------------------------------------------------

    def _checked_addresses(
        self, plugin: str, hop: _Hop, deadline: _Deadline
    ) -> tuple[IPAddress, ...]:
        """Every address the host resolves to, each one permitted by the policy."""
        url = hop.url
        if deadline.expired:
            raise self._timeout(plugin, hop, deadline)
        if url.ip is not None:
            addresses: tuple[IPAddress, ...] = (url.ip,)
        else:
            try:
                addresses = tuple(
                    self._resolver.resolve(url.host, url.port, timeout_s=deadline.remaining())
                )
            except DnsError as exc:
                raise self._dns_error(plugin, hop, str(exc)) from exc
            except Exception as exc:  # a custom resolver's own failure: fail closed
                raise self._dns_error(
                    plugin, hop, f"the resolver failed ({type(exc).__name__})"
                ) from exc
            if not addresses:
                raise self._dns_error(plugin, hop, f"{url.host!r} resolved to no address")
        for address in addresses:
            if not isinstance(address, IPv4Address | IPv6Address):
                raise self._dns_error(plugin, hop, "the resolver returned a non-address")
            verdict = classify(address)
            if not self.policy.permits(verdict):
                what = "the URL's address" if url.ip is not None else f"host {url.host!r}"
                verb = "is" if url.ip is not None else "resolves to"
                raise broker_error(
                    BlockedByPolicyError,
                    plugin=plugin,
                    method=hop.method,
                    url=url.redacted(),
                    reason=f"{what} {verb} {verdict.describe()}",
                    fix="plugins reach public addresses only; an administrator can allow a "
                    "private network with NetworkPolicy.allowed_networks",
                )
        return addresses

    def _dns_error(self, plugin: str, hop: _Hop, reason: str) -> DnsError:
        return broker_error(
            DnsError,
            plugin=plugin,
            method=hop.method,
            url=hop.url.redacted(),
            reason=reason,
            fix="check the host name",
        )

    # -- the exchange --------------------------------------------------------------------

    def _send(
        self,
        plugin: str,
        hop: _Hop,
        addresses: tuple[IPAddress, ...],
        deadline: _Deadline,
        watchdog: _Watchdog,
        *,
        tally: _Tally,
    ) -> _Answer:
        """Send the hop to the first checked address that accepts a connection."""
        self._limiter.spend(plugin, len(hop.body))
        failure: BrokerError | None = None
        for address in dict.fromkeys(connect_address(a) for a in addresses):
            try:
                return self._exchange(plugin, hop, address, deadline, watchdog, tally=tally)
            except _NotConnectedError as exc:
                # Nothing was sent: trying the next checked address is safe.
                failure = exc.error
                failure.__cause__ = exc.__cause__
        assert failure is not None  # addresses is never empty
        raise failure

    def _exchange(
        self,
        plugin: str,
        hop: _Hop,
        address: IPAddress,
        deadline: _Deadline,
        watchdog: _Watchdog,
        *,
        tally: _Tally,
    ) -> _Answer:
        url = hop.url
        remaining = deadline.remaining()
        if remaining <= 0.0:
            raise self._timeout(plugin, hop, deadline)
        number = str(address) if isinstance(address, IPv4Address) else f"[{address}]"

        def trace(event: str, info: dict[str, Any]) -> None:
            if event == "connection.connect_tcp.complete":
                stream = info.get("return_value")
                watchdog.attach(None if stream is None else stream.get_extra_info("socket"))

        try:
            request = httpx.Request(
                hop.method,
                f"{url.scheme}://{number}:{url.port}{url.target}",
                headers=[("Host", url.authority), *hop.headers, ("Accept-Encoding", "identity")],
                content=hop.body or None,
                extensions={
                    "timeout": {
                        "connect": remaining,
                        "read": remaining,
                        "write": remaining,
                        "pool": remaining,
                    },
                    # TLS sends this name and checks the certificate against it
                    # (httpcore's documented request extension), while the socket
                    # goes to the checked address in the URL.
                    "sni_hostname": url.host.strip("[]"),
                    "trace": trace,
                },
            )
            # The transport, not an httpx.Client: a client parses a redirect's
            # Location with httpx's own URL parser even when it does not follow
            # it, and a Location it cannot parse (``http:x``) raised
            # httpx.InvalidURL out of the fetch (issue 13). The broker reads
            # Location itself, by caplet's rules (_urls.resolve_location).
            with httpx.HTTPTransport(
                verify=self._ssl_context,
                trust_env=False,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=0),
            ) as transport:
                response = transport.handle_request(request)
                try:
                    return self._read(plugin, hop, response, deadline, tally)
                finally:
                    watchdog.attach(None)
                    response.close()
        except BrokerError:
            raise
        except _FOREIGN as exc:
            raise self._translate(plugin, hop, exc, deadline, watchdog) from exc

    def _read(
        self,
        plugin: str,
        hop: _Hop,
        response: httpx.Response,
        deadline: _Deadline,
        tally: _Tally,
    ) -> _Answer:
        headers = tuple(
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in response.headers.raw
        )
        if response.status_code in _REDIRECTS:
            locations = [value for name, value in headers if name.lower() == "location"]
            if len(locations) > 1:
                raise broker_error(
                    RedirectError,
                    plugin=plugin,
                    method=hop.method,
                    url=hop.url.redacted(),
                    reason=f"the server redirected (status {response.status_code}) with "
                    f"{len(locations)} Location headers, so where it leads is ambiguous",
                    fix="fix the server's redirect",
                )
            if locations:
                return _Answer(response.status_code, headers, b"", locations[0])
        limit = self.policy.max_response_bytes
        declared = response.headers.get("content-length", "")
        # isascii: '²'.isdigit() is True, and int('²') raises; so does int() of
        # more than 4300 digits (a length no limit comes near).
        if (
            hop.method != "HEAD"
            and declared.isascii()
            and declared.isdigit()
            and (len(declared) > 18 or int(declared) > limit)
        ):
            raise self._too_large(plugin, hop, f"declares {int(declared)} bytes")
        body = bytearray()
        budget = self._limiter.budget_left(plugin)
        try:
            for chunk in response.iter_raw(_CHUNK):
                body += chunk
                if len(body) > limit:
                    raise self._too_large(plugin, hop, f"exceeds {limit} bytes")
                if len(body) > budget:
                    raise broker_error(
                        RateLimitError,
                        plugin=plugin,
                        method=hop.method,
                        url=hop.url.redacted(),
                        reason=f"the response exceeds the {budget} bytes left of the plugin's "
                        f"data budget ({self.policy.bytes_per_hour} per hour)",
                        fix="retry later, or raise NetworkPolicy.bytes_per_hour",
                        category="data budget exhausted",
                    )
                if deadline.expired:
                    raise self._timeout(plugin, hop, deadline)
        finally:
            self._limiter.spend(plugin, len(body))
            tally.received = len(body)
        return _Answer(response.status_code, headers, bytes(body), None)

    def _too_large(self, plugin: str, hop: _Hop, what: str) -> SizeLimitError:
        return broker_error(
            SizeLimitError,
            plugin=plugin,
            method=hop.method,
            url=hop.url.redacted(),
            reason=f"the response {what}; the limit is {self.policy.max_response_bytes}",
            fix="request less (a range or a page), or raise NetworkPolicy.max_response_bytes",
            category="response too large",
        )

    def _timeout(self, plugin: str, hop: _Hop, deadline: _Deadline) -> FetchTimeoutError:
        return broker_error(
            FetchTimeoutError,
            plugin=plugin,
            method=hop.method,
            url=hop.url.redacted(),
            reason=f"no complete response within {deadline.seconds:g} s",
            fix=f"pass a longer timeout (at most {self.policy.max_timeout_s:g} s) or check "
            f"the server",
        )

    def _translate(
        self,
        plugin: str,
        hop: _Hop,
        exc: Exception,
        deadline: _Deadline,
        watchdog: _Watchdog,
    ) -> BrokerError | _NotConnectedError:
        """Map an error of the HTTP stack (``_FOREIGN``) to a category; never quote its
        text (it may hold an address)."""
        where = {"plugin": plugin, "method": hop.method, "url": hop.url.redacted()}
        if isinstance(exc, httpx.TimeoutException) or watchdog.fired or deadline.expired:
            return self._timeout(plugin, hop, deadline)
        tls = _cause(exc, ssl.SSLError)
        if tls is not None:
            if isinstance(tls, ssl.SSLCertVerificationError):
                reason = f"the server's certificate was refused ({tls.verify_message})"
            elif isinstance(exc, httpx.ConnectError):
                reason = f"the TLS handshake failed ({tls.reason or type(tls).__name__})"
            else:
                reason = f"the TLS connection failed ({tls.reason or type(tls).__name__})"
            return broker_error(
                TlsError,
                **where,
                reason=reason,
                fix="the server must present a valid certificate for this host name and "
                "speak TLS correctly",
            )
        if isinstance(exc, httpx.ConnectError):
            refused = _cause(exc, ConnectionRefusedError) is not None
            return _NotConnectedError(
                broker_error(
                    ConnectionFailedError,
                    **where,
                    reason="the server refused the connection"
                    if refused
                    else "the server could not be reached",
                    fix="check that the service is running and reachable on that port",
                    category="connection refused" if refused else None,
                )
            )
        if isinstance(exc, httpx.RemoteProtocolError | httpx.StreamError | ValueError):
            # A ValueError (a UnicodeError among them) that reaches here unmapped
            # comes from reading what the server sent.
            return broker_error(
                ResponseError,
                **where,
                reason="the server's response is not valid HTTP/1.1, or it closed the "
                "connection early",
                fix="check the server",
            )
        if isinstance(exc, httpx.NetworkError | OSError):
            return broker_error(
                ConnectionFailedError,
                **where,
                reason="the connection was closed or reset",
                fix="retry, or check the server",
            )
        return broker_error(
            BlockedByPolicyError,
            **where,
            reason=f"the HTTP library refused the request ({type(exc).__name__})",
            fix="check the method, headers and body",
        )

    def _record(
        self,
        plugin: str,
        method: str,
        url: str,
        *,
        hop: int,
        allowed: bool,
        outcome: str,
        detail: str,
        capability: str = "",
        sent: int = 0,
        received: int = 0,
    ) -> None:
        if self._on_decision is None:
            return
        self._on_decision(
            BrokerDecision(
                at=self._wall_clock(),
                plugin=plugin,
                method=method,
                url=url,
                allowed=allowed,
                outcome=outcome,
                detail=detail,
                capability=capability,
                hop=hop,
                sent_bytes=sent,
                received_bytes=received,
            )
        )


class _NotConnectedError(Exception):
    """No connection was made to one address (nothing sent): the next may be tried."""

    def __init__(self, error: BrokerError) -> None:
        super().__init__(str(error))
        self.error = error


def _cause(exc: BaseException, kind: type[_T]) -> _T | None:
    """The first exception of ``kind`` in ``exc``'s cause/context chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
