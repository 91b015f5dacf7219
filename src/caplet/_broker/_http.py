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

This module decides which hop is made (steps 1-3 and 5: the URL, the
grants, the budget, the addresses, the redirects); making it on the wire,
and translating what fails there, is :mod:`._http_wire`'s, and the state
of one fetch in flight (the hop, the answer, the deadline and its
watchdog) is :mod:`._http_hop`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from ipaddress import IPv4Address, IPv6Address

from caplet._broker._addresses import IPAddress, classify
from caplet._broker._headers import (
    header_bytes,
    is_credential,
    sanitise_headers,
    without_credentials,
)
from caplet._broker._http_hop import _Answer, _Deadline, _Hop, _Tally
from caplet._broker._http_wire import HttpWire
from caplet._broker._messages import broker_error
from caplet._broker._model import HttpRequest, HttpResponse
from caplet._broker._urls import match_grant, parse_url, resolve_location
from caplet._capabilities._model import NetHttpCapability
from caplet._errors import (
    BlockedByPolicyError,
    BrokerError,
    CapletError,
    DnsError,
    RedirectError,
    SizeLimitError,
)
from caplet._logs import caplet_logger
from caplet._version import __version__
from caplet._watchdog import SocketWatchdog

__all__ = ["ALLOWED_METHODS", "INTERNAL_ERROR", "HttpBroker"]

logger = caplet_logger()

#: TRACE (cross-site tracing) and CONNECT (a raw tunnel past every rule) are refused.
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The category of a fetch that failed through a bug of caplet's (never the plugin's or
#: the server's doing): a plain BrokerError, so callers need no new class.
INTERNAL_ERROR = "internal error"


class HttpBroker(HttpWire):
    """Performs brokered HTTP(S) requests for plugins, enforcing the network policy.

    ``resolver`` defaults to the system resolver; ``ssl_context`` to httpx's
    default (certifi's CA bundle, ``SSL_CERT_FILE`` honoured); ``clock`` is
    the monotonic clock of the rate limits and ``wall_clock`` the time
    stamped on decisions (both injectable so tests never sleep);
    ``on_decision`` receives every decision for the permission log. One
    broker serves every plugin (rates and budgets are kept per plugin name)
    and is safe to use from several threads.
    """

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
        watchdog = SocketWatchdog(timeout_s)
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
        watchdog: SocketWatchdog,
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
                    sent=tally.sent,
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
                sent=tally.sent,
                received=tally.received,
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
        if url.origin != hop.url.origin and any(is_credential(n) for n, _ in headers):
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
