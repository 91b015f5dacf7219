"""One hop on the wire: the exchange with a checked address, the body within limits, errors.

:class:`HttpWire` holds what every fetch shares (policy, resolver, TLS
context, rate limiter, the decision sink), connects to a hop's address *by
number* with the name for TLS, reads the body within the size limit and
the deadline, charges the plugin's budget, and translates what the HTTP
stack raises into the :class:`~caplet._errors.BrokerError` of its category
(``_translate``); ``_record`` reports each decision. Apart from
:mod:`._http`, whose checks (URL, grants, addresses, redirects) decide
*which* hop is made; this module only makes it.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any, TypeVar

import httpx

from caplet._broker._addresses import IPAddress, connect_address
from caplet._broker._headers import header_bytes
from caplet._broker._http_hop import _Answer, _Deadline, _Hop, _Meter, _Tally
from caplet._broker._limits import Clock, RateLimiter
from caplet._broker._messages import broker_error
from caplet._broker._model import BrokerDecision
from caplet._broker._policy import NetworkPolicy
from caplet._broker._resolver import Resolver
from caplet._broker._system_resolver import SystemResolver
from caplet._errors import (
    BlockedByPolicyError,
    BrokerError,
    ConnectionFailedError,
    FetchTimeoutError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)
from caplet._watchdog import SocketWatchdog

__all__ = ["DecisionSink", "HttpWire", "sent_bytes"]


#: Receives one :class:`BrokerDecision` per hop; an exception it raises aborts the fetch.
DecisionSink = Callable[[BrokerDecision], None]

_T = TypeVar("_T", bound=BaseException)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Statuses whose answer never has a body (RFC 9112 6.3), whatever length they declare.
_BODILESS = frozenset({204, 304})
_CHUNK = 64 * 1024
#: What the HTTP stack raises on a broken exchange (httpx maps httpcore's and h11's
#: errors to HTTPError; the others reach through unmapped: a URL or header httpx
#: will not build, a stream used wrongly, the OS's socket and TLS errors, text
#: that does not decode). Each becomes a BrokerError in ``_translate``.
_FOREIGN = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError)


class HttpWire:
    """The wire half of :class:`~caplet._broker._http.HttpBroker` (see the module docstring)."""

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

    # -- the exchange --------------------------------------------------------------------

    def _send(
        self,
        plugin: str,
        hop: _Hop,
        addresses: tuple[IPAddress, ...],
        deadline: _Deadline,
        watchdog: SocketWatchdog,
        *,
        tally: _Tally,
    ) -> _Answer:
        """Send the hop to the first checked address that accepts a connection."""
        tally.sent = sent_bytes(hop)
        self._limiter.spend(plugin, tally.sent)
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
        watchdog: SocketWatchdog,
        *,
        tally: _Tally,
    ) -> _Answer:
        url = hop.url
        remaining = deadline.remaining()
        if remaining <= 0.0:
            raise self._timeout(plugin, hop, deadline)
        number = str(address) if isinstance(address, IPv4Address) else f"[{address}]"
        budget = self._limiter.budget_left(plugin)
        meter = _Meter(budget, lambda: self._over_budget(plugin, hop, budget))

        def trace(event: str, info: dict[str, Any]) -> None:
            stream = info.get("return_value")
            if event == "connection.connect_tcp.complete":
                watchdog.attach(None if stream is None else stream.get_extra_info("socket"))
            # Both streams: after TLS starts, everything is read through the second
            # (and charged as the socket's received bytes: _Meter).
            if stream is not None and event == "connection.connect_tcp.complete":
                meter.attach(stream)
            if stream is not None and event == "connection.start_tls.complete":
                meter.attach(stream, tls=True)

        try:
            request = httpx.Request(
                hop.method,
                f"{url.scheme}://{number}:{url.port}{url.target}",
                headers=list(_wire_headers(hop)),
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
                    return self._read(plugin, hop, response, deadline)
                finally:
                    watchdog.attach(None)
                    response.close()
        except BrokerError:
            raise
        except _FOREIGN as exc:
            raise self._translate(plugin, hop, exc, deadline, watchdog) from exc
        finally:
            # Whatever crossed the wire, refused or not, is charged and reported.
            self._limiter.spend(plugin, meter.received)
            tally.received = meter.received

    def _read(
        self,
        plugin: str,
        hop: _Hop,
        response: httpx.Response,
        deadline: _Deadline,
    ) -> _Answer:
        """The answer of ``response``: a redirect's Location, or the body within the limit.

        The plugin's data budget is the meter's (``_exchange``): every byte read,
        the head's as well as the body's.
        """
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
        # more than 4300 digits (a length no limit comes near). A HEAD answer and
        # a 304 declare the length of a representation they do not carry (RFC 9110
        # 8.6; RFC 9112 6.3: no body follows), so only a body's length is judged.
        if (
            hop.method != "HEAD"
            and response.status_code not in _BODILESS
            and declared.isascii()
            and declared.isdigit()
            and (len(declared) > 18 or int(declared) > limit)
        ):
            raise self._too_large(plugin, hop, f"declares {int(declared)} bytes")
        body = bytearray()
        for chunk in response.iter_raw(_CHUNK):
            body += chunk
            if len(body) > limit:
                raise self._too_large(plugin, hop, f"exceeds {limit} bytes")
            if deadline.expired:
                raise self._timeout(plugin, hop, deadline)
        return _Answer(response.status_code, headers, bytes(body), None)

    def _over_budget(self, plugin: str, hop: _Hop, budget: int) -> RateLimitError:
        return broker_error(
            RateLimitError,
            plugin=plugin,
            method=hop.method,
            url=hop.url.redacted(),
            reason=f"the response exceeds the {budget} bytes left of the plugin's "
            f"data budget ({self.policy.bytes_per_hour} per hour)",
            fix="retry later, or raise NetworkPolicy.bytes_per_hour",
            category="data budget exhausted",
        )

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
        watchdog: SocketWatchdog,
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


def _wire_headers(hop: _Hop) -> tuple[tuple[str, str], ...]:
    """The header lines a hop sends: its own, between the broker's Host and Accept-Encoding."""
    return (("Host", hop.url.authority), *hop.headers, ("Accept-Encoding", "identity"))


def sent_bytes(hop: _Hop) -> int:
    """What a hop puts on the wire: its request line, header lines and body (headers
    are the plugin's to choose too, up to ``max_request_bytes``: charged like a body)."""
    line = len(f"{hop.method} {hop.url.target} HTTP/1.1\r\n".encode())
    return line + header_bytes(_wire_headers(hop)) + 2 + len(hop.body)


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
