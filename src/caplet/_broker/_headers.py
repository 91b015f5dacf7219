"""Request headers a plugin may send, and the credentials a redirect must not carry.

A plugin's headers are checked, not trusted:

* a name must be an RFC 9110 token and a value visible ASCII, space or tab
  (RFC 9110 5.5): CR, LF and NUL would split the request (header injection,
  request smuggling), so they are refused, as is any other control character
  and non-ASCII text; spaces and tabs around a value are trimmed, as
  browsers do (a field value excludes them, RFC 9110 5.5);
* the broker owns the framing and routing headers, so those are dropped:
  hop-by-hop headers (RFC 9110 7.6.1: Connection, Keep-Alive, TE, Trailer,
  Transfer-Encoding, Upgrade, Proxy-*), Host and Content-Length (set from
  the checked URL and the body), Expect, and headers that claim a client
  address or an original URL (X-Forwarded-*, Forwarded, X-Real-IP ...),
  which internal services trust to identify a caller. A name is compared
  with ``_`` read as ``-``: CGI and WSGI servers (wsgiref among them) turn
  both into ``_`` (``HTTP_X_FORWARDED_FOR``), so ``X_Forwarded_For`` would
  reach the application as the header it spoofs (red team round 17);
* so are the headers an authenticating front proxy sets to say *who* the
  caller is (``X-Forwarded-User``, ``Remote-User``, ``X-Auth-Request-Email``,
  ``X-Goog-Authenticated-User-Email``, ``X-Amzn-Oidc-Identity``,
  ``X-Forwarded-Client-Cert`` ...), which a service behind it trusts as a
  login, and the method overrides (``X-HTTP-Method-Override``) that turn a
  POST into a method the broker refuses (TRACE, CONNECT). These families
  are matched by prefix as well as by name (:data:`STRIPPED_PREFIXES`), so
  a spelling the table does not list (``X-Forwarded-Preferred-Username``)
  is dropped too (red team round 32);
* ``Accept-Encoding`` becomes ``identity``: the size limit counts the bytes
  the plugin receives, and a compressed body (a "zip bomb") would be far
  larger than the bytes on the wire.

On a redirect to another origin the credentials (Authorization, Cookie,
Proxy-Authorization) are dropped, and they stay dropped for the rest of the
chain, even if it returns to the first origin: the hop that left has
already shown the chain is not the plugin's own (as browsers and httpx do).
Most APIs take their key in a header of their own (``X-Api-Key``,
``Private-Token``, ``X-Auth-Token``, ``Ocp-Apim-Subscription-Key``,
``X-Amz-Security-Token``): a header whose name holds a word of
:data:`SECRET_WORDS` is a credential too (red team round 32: an open
redirect on one granted origin handed the user's key for it to another).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caplet._broker._messages import broker_error
from caplet._errors import BlockedByPolicyError

__all__ = [
    "CREDENTIAL_HEADERS",
    "SECRET_WORDS",
    "STRIPPED_HEADERS",
    "STRIPPED_PREFIXES",
    "SanitisedHeaders",
    "header_bytes",
    "is_credential",
    "sanitise_headers",
    "without_credentials",
]

#: Dropped from every request (lower-case names).
STRIPPED_HEADERS = frozenset(
    {
        # hop-by-hop and framing (RFC 9110 7.6.1, RFC 9112 6)
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
        "upgrade", "host", "content-length", "expect", "http2-settings",
        "proxy-authorization", "proxy-authenticate", "proxy-authorization-info",
        # httpoxy (CVE-2016-5385): a CGI server hands ``Proxy`` to its script as the
        # HTTP_PROXY variable, which the script's own HTTP client takes as its proxy
        "proxy",
        # who the client is / where the request came from (RFC 7239 and de-facto)
        "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
        "x-forwarded-port", "x-forwarded-server", "x-forwarded-prefix", "x-real-ip",
        "x-client-ip", "x-originating-ip", "x-remote-ip", "x-remote-addr", "x-cluster-client-ip",
        "true-client-ip", "cf-connecting-ip", "fastly-client-ip", "client-ip", "via",
        "x-proxyuser-ip", "x-host", "x-http-host-override", "x-original-url",
        "x-rewrite-url", "x-original-host",
        "x-forwarded", "forwarded-for", "x-appengine-user-ip", "x-azure-clientip",
        "x-azure-socketip", "fly-client-ip", "x-vercel-forwarded-for", "cf-pseudo-ipv4",
        # who the caller *is*, as an authenticating proxy asserts it (round 32)
        "remote-user", "x-remote-user", "x-arr-clientcert",
        # set by the broker (see the module docstring)
        "accept-encoding",
    }
)  # fmt: skip

#: Dropped from every request whatever follows the prefix (lower-case): the
#: families of forwarding, identity and method-override headers (round 32).
STRIPPED_PREFIXES = (
    "x-forwarded-", "forwarded-", "x-original-", "x-envoy-", "cf-connecting-", "proxy-",
    # identity asserted by a front proxy: oauth2-proxy, Grafana's auth proxy, Google
    # IAP, AWS ALB, Azure App Service, Envoy/Istio and nginx client certificates
    "x-auth-request-", "x-webauth-", "x-goog-authenticated-", "x-amzn-oidc-",
    "x-ms-client-principal", "x-client-cert", "ssl-client-", "x-ssl-client-",
    # a method the broker refuses, asked for in a header (Rails, Express, Symfony ...)
    "x-http-method", "x-method-override",
)  # fmt: skip

#: Dropped when a redirect leaves the origin, and never re-added.
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
#: A header whose lower-case name (``_`` read as ``-``) holds one of these words is
#: dropped with the credentials: the names APIs give their keys and tokens.
SECRET_WORDS = (
    "auth", "token", "key", "secret", "session", "cookie", "password", "passwd",
    "credential", "signature", "subscription", "csrf", "xsrf",
)  # fmt: skip

_TOKEN = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
_VALUE = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\t"}
_MAX_HEADERS = 100


@dataclass(frozen=True, slots=True)
class SanitisedHeaders:
    """The headers to send and the names that were dropped (for the decision log)."""

    headers: tuple[tuple[str, str], ...]
    dropped: tuple[str, ...]


def sanitise_headers(headers: object, *, plugin: str, method: str, url: str) -> SanitisedHeaders:
    """Check a plugin's headers and drop the stripped ones.

    ``headers`` is a mapping or a sequence of (name, value) string pairs.

    Raises :class:`BlockedByPolicyError` for a malformed name or value.
    """

    def refuse(reason: str, fix: str) -> BlockedByPolicyError:
        return broker_error(
            BlockedByPolicyError, plugin=plugin, method=method, url=url, reason=reason, fix=fix
        )

    if isinstance(headers, Mapping):
        headers = list(headers.items())
    if not isinstance(headers, Sequence) or isinstance(headers, str | bytes):
        raise refuse(
            f"headers must be a mapping or a list of (name, value) pairs, not "
            f"{type(headers).__name__}",
            "pass a dict of strings",
        )
    if len(headers) > _MAX_HEADERS:
        raise refuse(f"{len(headers)} headers; at most {_MAX_HEADERS} are allowed", "send fewer")
    kept: list[tuple[str, str]] = []
    dropped: list[str] = []
    for pair in headers:
        if not (
            isinstance(pair, Sequence)
            and not isinstance(pair, str | bytes)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and isinstance(pair[1], str)
        ):
            raise refuse("each header must be a (name, value) pair of strings", "pass strings")
        name, value = pair[0], pair[1]
        if not name or not set(name) <= _TOKEN:
            raise refuse(
                f"header name {name[:60]!r} is not an HTTP token (RFC 9110 5.6.2: letters, "
                f"digits and !#$%&'*+-.^_`|~; no CR, LF, NUL, space or ':')",
                "fix the header name",
            )
        if not set(value) <= _VALUE:
            bad = next(c for c in value if c not in _VALUE)
            raise refuse(
                f"the value of header {name!r} contains U+{ord(bad):04X}; CR, LF, NUL, other "
                f"control characters and non-ASCII text are refused (RFC 9110 5.5)",
                "send visible ASCII only (encode other text, e.g. RFC 8187 or base64)",
            )
        if _stripped(name.lower().replace("_", "-")):
            dropped.append(name)
        else:
            # A field value excludes the whitespace around it (RFC 9110 5.5), and
            # h11 refuses to write it, after the connection is made (round 17).
            kept.append((name, value.strip(" \t")))
    return SanitisedHeaders(tuple(kept), tuple(dropped))


def _stripped(name: str) -> bool:
    """Whether the broker drops the header ``name`` (lower-case, ``_`` read as ``-``)."""
    return name in STRIPPED_HEADERS or name.startswith(STRIPPED_PREFIXES)


def is_credential(name: str) -> bool:
    """Whether the header ``name`` may carry a credential (see the module docstring)."""
    lowered = name.lower().replace("_", "-")
    return lowered in CREDENTIAL_HEADERS or any(word in lowered for word in SECRET_WORDS)


def without_credentials(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``headers`` minus every one that may carry a credential (:func:`is_credential`)."""
    return tuple((n, v) for n, v in headers if not is_credential(n))


def header_bytes(headers: Iterable[tuple[str, str]]) -> int:
    """The size of the header lines on the wire (``name: value\\r\\n``)."""
    return sum(len(name) + len(value) + 4 for name, value in headers)
