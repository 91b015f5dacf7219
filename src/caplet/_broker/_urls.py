"""Parse, normalise and authorise a URL a plugin asks the broker to fetch.

Normalisation comes first so that every rule sees the URL the network will
see: the host is IDNA-encoded (UTS 46, as browsers do), lower-cased and
stripped of its trailing dot; numeric hosts in any of the forms resolvers
accept (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) become the
dotted-quad address they denote, and a host that merely *looks* numeric but
is not a valid address is refused; dot segments (also percent-encoded ones)
are removed from the path (RFC 3986 5.2.4) and percent-encoded unreserved
characters decoded (RFC 3986 6.2.2.2), so ``/v1/../admin`` cannot pass as
``/v1``. Then :func:`match_grant` checks the result against the plugin's
approved ``net.http`` capabilities. A redirect's ``Location`` goes through
the same rules (:func:`resolve_location`), as the server sent it.

Refused outright: anything but http/https, credentials (``user:pass@``),
control, format and whitespace characters, backslashes (WHATWG URL parsers
read them as ``/``, others do not: a parser differential), percent-encoded
hosts, zone ids, malformed percent escapes, URLs longer than the policy's
limit.
"""

from __future__ import annotations

import string
import unicodedata
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

import idna

from caplet._broker._addresses import IPAddress
from caplet._broker._messages import broker_error
from caplet._capabilities._model import NetHttpCapability
from caplet._errors import BlockedByPolicyError, InvalidUrlError

__all__ = ["DEFAULT_PORTS", "ParsedUrl", "match_grant", "parse_url", "resolve_location"]

DEFAULT_PORTS = {"http": 80, "https": 443}

_HOST_CHARS = frozenset(string.ascii_lowercase + string.digits + "-_")
_HEX = frozenset(string.hexdigits)
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_URL_FIX = "pass an absolute http(s) URL such as https://api.example.com/v1/items"
#: '/' and '\\' escaped, escaped twice, and in overlong UTF-8 (attack32), lower-case.
_ENCODED_SEPARATORS = (
    "%2f", "%5c", "%252f", "%255c", "%c0%af", "%e0%80%af", "%c1%9c", "%e0%81%9c",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """A normalised absolute URL.

    ``host`` is an ASCII DNS name, a dotted-quad IPv4 address or a bracketed
    IPv6 address (``[2001:db8::1]``), the same spelling
    :class:`~caplet._capabilities._model.NetHttpCapability` uses; ``ip`` is
    set for the two address forms. ``port`` is explicit, ``path`` starts
    with ``/`` and ``query`` excludes the ``?``. The fragment is dropped: it
    is never sent.
    """

    scheme: str
    host: str
    port: int
    path: str
    query: str = ""
    ip: IPAddress | None = None

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what "same origin" compares (RFC 6454)."""
        return (self.scheme, self.host, self.port)

    @property
    def authority(self) -> str:
        """``host`` or ``host:port`` when the port is not the scheme's default: the Host header."""
        if self.port == DEFAULT_PORTS[self.scheme]:
            return self.host
        return f"{self.host}:{self.port}"

    @property
    def target(self) -> str:
        """The request target: path and query."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"

    def redacted(self) -> str:
        """The URL for logs and messages: a query often carries an API key, so it is elided."""
        query = "?..." if self.query else ""
        return f"{self.scheme}://{self.authority}{self.path}{query}"

    @property
    def has_encoded_separator(self) -> bool:
        """True when the path holds ``%2F`` or ``%5C``, encoded twice (``%252F``) or in
        an overlong UTF-8 form (``%C0%AF``).

        A server that decodes them sees more segments than the broker checked.
        """
        lowered = self.path.lower()
        return any(form in lowered for form in _ENCODED_SEPARATORS)


def parse_url(text: object, *, plugin: str, max_length: int) -> ParsedUrl:
    """Parse and normalise ``text``; raise :class:`InvalidUrlError` on anything refused.

    No other exception escapes, whatever ``text`` holds (a property test
    checks it).
    """
    try:
        return _parse(text, max_length)
    except _RefusedUrlError as refusal:
        raise broker_error(
            InvalidUrlError,
            plugin=plugin,
            method="",
            url="",
            reason=f"URL {refusal.shown}: {refusal.reason}" if refusal.shown else refusal.reason,
            fix=refusal.fix,
        ) from None


def resolve_location(
    base: ParsedUrl, location: str, *, plugin: str, method: str, status: int, max_length: int
) -> ParsedUrl:
    """The URL a redirect's ``Location`` leads to from ``base``, by the rules of :func:`parse_url`.

    The server's text is checked as it was sent (the standard library's
    ``urljoin`` silently drops tabs, newlines and leading spaces, which would
    hide what the server wrote), resolved against ``base`` as RFC 3986 5.2
    says (non-strict: ``http:x`` is relative to an ``http`` base, as the
    WHATWG URL Standard reads it too), and the result parsed by
    :func:`parse_url`'s rules. A Location is never handed to httpx, whose
    parser would raise its own exceptions (issue 13). Raises
    :class:`InvalidUrlError` naming the Location; no other exception escapes.
    """
    shown = _show(location)
    try:
        _check_characters(location, shown, max_length)
        head, sep, authority = location.partition("//")
        if sep and (not head or (head.endswith(":") and head[:-1].isalnum())):
            _check_brackets(authority, shown)  # 'scheme://host' or '//host'
        try:
            target = urllib.parse.urljoin(str(base), location)
        except ValueError as exc:  # an unbalanced '[' in the authority
            raise _invalid(shown, "the URL does not parse") from exc
        return _parse(target, max_length)
    except _RefusedUrlError as refusal:
        raise broker_error(
            InvalidUrlError,
            plugin=plugin,
            method=method,
            url=base.redacted(),
            reason=f"the server redirected (status {status}) to Location {shown}, which caplet "
            f"refuses: {refusal.reason}",
            fix="the redirect was not followed (the server must send a Location that is a plain "
            "http(s) URL or path; request the final URL directly)",
        ) from None


def _parse(text: object, max_length: int) -> ParsedUrl:
    if not isinstance(text, str):
        raise _invalid("", f"the URL must be a string, not {type(text).__name__}")
    shown = _show(text)
    _check_characters(text, shown, max_length)
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        raise _invalid(shown, "only absolute http:// and https:// URLs are allowed")
    _check_brackets(text[len(scheme) + 3 :], shown)
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:  # an unbalanced '[' in the authority
        raise _invalid(shown, "the URL does not parse", _URL_FIX) from exc
    if "@" in parts.netloc:
        raise _invalid(
            shown,
            "the URL contains credentials ('user@' or 'user:password@')",
            "send credentials in a header (Authorization), never in the URL",
        )
    host, ip, port = _parse_authority(parts.netloc, scheme, shown)
    if not parts.path.isascii() or not parts.query.isascii():
        raise _invalid(
            shown, "the path or query contains non-ASCII characters", "percent-encode them"
        )
    path = _normalise_path(parts.path, shown)
    _check_escapes(parts.query, shown)
    return ParsedUrl(scheme, host, port, path, parts.query, ip)


def _check_brackets(rest: str, shown: str) -> None:
    """Brackets in the authority only around one IPv6 address, by caplet's own rule.

    ``urlsplit``'s checks of a bracketed host differ between patch releases
    (3.11.4 added the IPv6 check, CVE-2024-11168's fix the text after ']'; Debian's
    3.11.2 carries a backport), so the same URL was refused with a different reason,
    or by a later check, depending on the Python that runs the host.
    """
    authority = rest[: min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))]
    host = authority.rpartition("@")[2]
    if "[" not in host and "]" not in host:
        return
    inner, sep, after = host[1:].partition("]")
    if not host.startswith("[") or not sep or "[" in inner:
        raise _invalid(shown, "the URL does not parse")
    if (after and not after.startswith(":")) or "[" in after or "]" in after:
        raise _invalid(shown, "the IPv6 address is not closed by ']'")
    if "%" not in inner:  # a zone id gets its own reason from _parse_authority
        try:
            IPv6Address(inner)
        except ValueError as exc:
            raise _invalid(shown, "the URL does not parse") from exc


def _check_characters(text: str, shown: str, max_length: int) -> None:
    """The length, and no control, format, whitespace or backslash character."""
    if len(text) > max_length:
        raise _invalid(
            shown,
            f"the URL is {len(text)} characters long; the limit is {max_length}",
            "shorten it (move data into the request body)",
        )
    for char in text:
        category = unicodedata.category(char)
        if category in ("Cc", "Cf") or category.startswith("Z"):
            raise _invalid(
                shown,
                f"the URL contains a control, invisible or whitespace character U+{ord(char):04X}",
                "percent-encode it (%20 for a space)",
            )
    if "\\" in text:
        raise _invalid(shown, "the URL contains a backslash", "use '/' or percent-encode it as %5C")


def match_grant(
    url: ParsedUrl,
    grants: Sequence[NetHttpCapability],
    *,
    plugin: str,
    method: str,
    allow_wildcards: bool,
) -> NetHttpCapability:
    """The approved capability that covers ``url``; raise :class:`BlockedByPolicyError` if none.

    A grant covers a URL when the scheme is equal (https only unless the
    capability names http), the host is the same (an exact host means only
    that host; ``*.example.com`` means its subdomains, never the apex, and
    only with ``allow_wildcards``), the port is equal, and the path is the
    grant's prefix or continues it at a segment boundary (``/v1`` covers
    ``/v1`` and ``/v1/x``, not ``/v10``). A URL naming an IP address is
    covered only by a capability naming that same address. Exact grants are
    preferred to wildcard ones; templated grants (not yet configured) grant
    nothing.
    """
    usable = [grant for grant in grants if not grant.templated]
    approved = ", ".join(str(grant) for grant in usable) or "none"
    exact = [g for g in usable if not g.wildcard and g.host == url.host]
    wild = [g for g in usable if g.wildcard and url.ip is None and _under(url.host, g.host)]

    def refuse(reason: str, fix: str) -> BlockedByPolicyError:
        return broker_error(
            BlockedByPolicyError,
            plugin=plugin,
            method=method,
            url=url.redacted(),
            reason=f"{reason} (approved: {approved})",
            fix=fix,
        )

    candidates = exact + (wild if allow_wildcards else [])
    if not candidates:
        if wild:
            raise refuse(
                f"host {url.host!r} is covered only by a wildcard capability, and the "
                f"network policy refuses wildcard hosts",
                "approve a capability for the exact host, or set "
                "NetworkPolicy(allow_wildcard_hosts=True)",
            )
        if url.ip is not None:
            raise refuse(
                f"the URL names the IP address {url.host}; a literal IP host is allowed only "
                f"when a net.http capability names that address",
                "use the host name, or declare net.http for that address",
            )
        raise refuse(
            f"no approved net.http capability covers host {url.host!r}",
            f"declare net.http:{url.scheme}://{url.authority} in the manifest and have it approved",
        )
    candidates = [g for g in candidates if g.scheme == url.scheme]
    if not candidates:
        raise refuse(
            f"scheme {url.scheme!r} is not approved for host {url.host!r} (https only unless "
            f"the capability names http)",
            "use the approved scheme",
        )
    candidates = [g for g in candidates if g.port == url.port]
    if not candidates:
        raise refuse(
            f"port {url.port} is not approved for host {url.host!r}", "use the approved port"
        )
    prefixed = [g for g in candidates if g.path_prefix]
    if url.has_encoded_separator and prefixed:
        candidates = [g for g in candidates if not g.path_prefix]
        if not candidates:
            raise refuse(
                "the path contains an encoded '/' or '\\' (%2F, %5C), or one encoded twice "
                "(%252F) or in overlong UTF-8 (%C0%AF), which a server may "
                "decode into segments outside the approved path prefix",
                "write the path without encoded separators",
            )
    for grant in candidates:
        prefix = _normalise_escapes(grant.path_prefix)
        if not prefix or url.path == prefix or url.path.startswith(prefix + "/"):
            return grant
    raise refuse(
        f"path {url.path!r} is outside the approved path prefix "
        f"({', '.join(repr(g.path_prefix) for g in candidates)})",
        "request a path under the prefix",
    )


# -- helpers -------------------------------------------------------------------------


def _under(host: str, suffix: str) -> bool:
    """True when ``host`` is a proper subdomain of ``suffix`` (not ``suffix`` itself)."""
    return host.endswith("." + suffix)


class _RefusedUrlError(Exception):
    """Why a URL is refused; the public functions turn it into the right error."""

    def __init__(self, shown: str, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.shown = shown
        self.reason = reason
        self.fix = fix


def _invalid(shown: str, reason: str, fix: str = _URL_FIX) -> _RefusedUrlError:
    return _RefusedUrlError(shown, reason, fix)


def _show(text: str) -> str:
    """The URL as quoted in an error: escaped, at most 100 characters, query elided."""
    head, sep, _ = text.partition("?")
    shown = head[:100] + ("..." if len(head) > 100 or sep else "")
    return repr(shown)


def _parse_authority(netloc: str, scheme: str, shown: str) -> tuple[str, IPAddress | None, int]:
    """Split ``host[:port]`` and normalise both."""
    if netloc.startswith("["):
        inner, sep, rest = netloc[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise _invalid(shown, "the IPv6 address is not closed by ']'")
        port_text = rest[1:] if rest else None
        if "%" in inner:
            raise _invalid(shown, "IPv6 zone ids ('%eth0') are not allowed")
        try:
            address = IPv6Address(inner)
        except ValueError as exc:
            raise _invalid(
                shown, "the bracketed host is not an IPv6 address", "write [2001:db8::1]"
            ) from exc
        host: str = f"[{address.compressed}]"
        ip: IPAddress | None = address
    else:
        host_text, sep, port_text_raw = netloc.rpartition(":")
        if not sep:
            host_text, port_text_raw = netloc, ""
        port_text = port_text_raw if sep else None
        host, ip = _normalise_host(host_text, shown)
    return host, ip, _parse_port(port_text, scheme, shown)


def _parse_port(text: str | None, scheme: str, shown: str) -> int:
    if not text:  # RFC 3986 3.2.3: an empty port means the scheme's default
        return DEFAULT_PORTS[scheme]
    if not (text.isascii() and text.isdigit()) or len(text) > 5 or not 1 <= int(text) <= 65535:
        raise _invalid(shown, f"invalid port {text!r}; expected a number from 1 to 65535")
    return int(text)


def _normalise_host(text: str, shown: str) -> tuple[str, IPAddress | None]:
    if not text:
        raise _invalid(shown, "the URL has no host")
    idna_error = _invalid(
        shown,
        "the host is not a valid internationalised domain name (IDNA)",
        "write the host in its 'xn--' punycode form, as idna.encode() gives it",
    )
    if "%" in text:
        raise _invalid(shown, "the host is percent-encoded", "write the host name plainly")
    if text.isascii():
        host = text.lower()
    else:
        try:
            host = idna.encode(text, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError) as exc:
            raise idna_error from exc
    if host.endswith("."):
        host = host[:-1]  # the root label (RFC 1034 3.1): 'a.com.' is 'a.com'
    labels = host.split(".")
    if not host or "" in labels:
        raise _invalid(shown, "the host has an empty label ('..' or a leading '.')")
    if _ends_in_number(labels[-1]):
        address = _parse_ipv4(labels)
        if address is None:
            raise _invalid(
                shown,
                "the host looks like a numeric IPv4 address but is not a valid one",
                "write an address as a dotted quad (203.0.113.7) or use a DNS name",
            )
        return str(address), address
    if any(label.startswith("xn--") for label in labels):
        # An A-label must decode (RFC 5891 5.4); a broken one would be shown
        # to the approver as one name and mean another to some resolver.
        try:
            idna.decode(host)
        except (idna.IDNAError, UnicodeError) as exc:
            raise idna_error from exc
    if len(host) > 253 or any(len(label) > 63 or not set(label) <= _HOST_CHARS for label in labels):
        raise _invalid(
            shown,
            "the host is not a valid DNS name (labels of 1-63 letters, digits, '-' or '_', "
            "at most 253 characters)",
        )
    return host, None


def _ends_in_number(label: str) -> bool:
    """The WHATWG URL Standard's "ends in a number" test on the last label."""
    if label.isascii() and label.isdigit():
        return True
    return label[:2] in ("0x", "0X") and set(label[2:]) <= _HEX


def _parse_ipv4(labels: list[str]) -> IPv4Address | None:
    """The WHATWG URL Standard's IPv4 parser (1-4 parts; decimal, 0-octal or 0x-hex).

    Hand-written because neither ``ipaddress`` (dotted quads only) nor
    ``socket.inet_aton`` (whose accepted forms differ between glibc and
    musl) give this reading, which is what browsers and resolvers turn
    ``127.1`` and ``0x7f000001`` into.
    """
    if len(labels) > 4:
        return None
    numbers: list[int] = []
    for label in labels:
        number = _parse_ipv4_number(label)
        if number is None:
            return None
        numbers.append(number)
    if any(number > 255 for number in numbers[:-1]):
        return None
    if numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - index)
    return IPv4Address(value)


def _parse_ipv4_number(label: str) -> int | None:
    radix, digits = 10, label
    if label[:2] in ("0x", "0X"):
        radix, digits = 16, label[2:]
    elif len(label) > 1 and label.startswith("0"):
        radix, digits = 8, label[1:]
    if not digits:
        return 0
    allowed = {10: string.digits, 16: string.hexdigits, 8: string.octdigits}[radix]
    # A part above 2**32 can never be valid; the length check also keeps int()
    # away from its 4300-digit limit.
    if not set(digits) <= set(allowed) or len(digits.lstrip("0")) > 11:
        return None
    return int(digits, radix)


def _check_escapes(text: str, shown: str) -> None:
    """Every ``%`` starts a two-hex-digit escape (RFC 3986 2.1); servers differ on the rest."""
    index = text.find("%")
    while index >= 0:
        if len(text) < index + 3 or not set(text[index + 1 : index + 3]) <= _HEX:
            raise _invalid(
                shown,
                "the URL contains a '%' that does not start a two-digit hex escape",
                "write a literal '%' as %25",
            )
        index = text.find("%", index + 1)


def _normalise_escapes(text: str) -> str:
    """Decode escapes of unreserved characters and upper-case the others (RFC 3986 6.2.2)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%" and index + 2 < len(text) and set(text[index + 1 : index + 3]) <= _HEX:
            decoded = chr(int(text[index + 1 : index + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else text[index : index + 3].upper())
            index += 3
        else:
            out.append(char)
            index += 1
    return "".join(out)


#: Overlong UTF-8 forms of '.', '/' and '\\' (two and three bytes; invalid UTF-8, which
#: old Tomcat and IIS decoded anyway: CVE-2008-2938, MS00-078), as the surrogate
#: escapes ``surrogateescape`` decodes them to.
_OVERLONG = {
    bytes(form).decode("utf-8", "surrogateescape"): chr(char)
    for char in (0x2E, 0x2F, 0x5C)
    for form in (
        (0xC0 | char >> 6, 0x80 | char & 0x3F),
        (0xE0, 0x80 | char >> 6, 0x80 | char & 0x3F),
    )
}


def _bare(segment: str) -> str:
    """``segment`` as a lenient server may read it: decoded (twice, as some servers
    decode), without NUL, control, space or tab characters, trailing dots trimmed
    down to two (Windows drops the rest)."""
    text = segment
    for _ in range(2):
        if "%" not in text:
            break
        # Back to the bytes first: a byte the last decode kept as a surrogate
        # ('%25%80', a '%' before a Latin-1 byte) made unquote_to_bytes' strict
        # UTF-8 encode of a str raise (attack35: the broker's "internal error").
        raw = text.encode("utf-8", "surrogateescape")
        text = urllib.parse.unquote_to_bytes(raw).decode("utf-8", "surrogateescape")
        for overlong, meant in _OVERLONG.items():
            text = text.replace(overlong, meant)
    kept = "".join(char for char in text if char.isprintable() and char not in " \t")
    return kept[:2] if kept and set(kept) == {"."} else kept


def _normalise_path(path: str, shown: str) -> str:
    """Normalise escapes, then remove dot segments (RFC 3986 5.2.4)."""
    _check_escapes(path, shown)
    if not path:
        return "/"
    segments = _normalise_escapes(path).split("/")[1:]
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        core = segment.split(";", 1)[0]
        if core in (".", "..") and segment != core:
            # Tomcat and others strip ';params' before resolving dot segments,
            # so '/v1/..;/admin' climbs out of '/v1' on those servers.
            raise _invalid(shown, "a dot segment carries ';' parameters ('..;')", "remove them")
        if segment not in (".", "..") and _bare(core) in (".", ".."):
            # The same differential by other characters: Jetty 9.4.37-9.4.42 dropped a
            # decoded NUL (CVE-2021-34429: '/.%00/WEB-INF/'), IIS and Windows servers
            # trim spaces and dots, and a server that decodes twice reads '%252e' as
            # '.': '/v1/..%00/admin' passed the '/v1' prefix and reached '/admin'.
            raise _invalid(
                shown,
                "a path segment is a '.' or '..' disguised by encoded NUL, control or space "
                "characters, more dots, or a second encoding",
                "remove them",
            )
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)
