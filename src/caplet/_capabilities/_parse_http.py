"""Parse the value of a ``net.http`` capability: a URL's scheme, host, port and path prefix.

Split out of :mod:`caplet._capabilities._parse` (one kind's rules, a third of that
module). The same strictness: purely textual, every error quotes the capability, says
what was expected and how to fix it.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

from caplet._capabilities._model import NetHttpCapability
from caplet._capabilities._public_suffix import is_public_suffix
from caplet._errors import CapabilityError

__all__ = ["parse_http"]

_LABEL_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_http(value: str, declared: str) -> NetHttpCapability:
    example = "net.http:https://api.example.com"
    if any(c.isspace() for c in value) or "\\" in value:
        raise CapabilityError(
            f"URL {value!r} in capability {declared!r} contains whitespace or a backslash; "
            f"percent-encode it, e.g. {example}/my%20path"
        )
    if "://" not in value:
        raise CapabilityError(
            f"URL {value!r} in capability {declared!r} has no scheme; expected "
            f"scheme://host[:port][/path], e.g. {example}"
        )
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError as exc:  # e.g. an unclosed '[' of an IPv6 literal
        raise CapabilityError(
            f"URL {value!r} in capability {declared!r} does not parse ({exc}); expected "
            f"scheme://host[:port][/path], e.g. {example}"
        ) from exc
    if parts.scheme not in _DEFAULT_PORTS:
        raise CapabilityError(
            f"scheme {parts.scheme!r} in capability {declared!r} is not supported; "
            f"use http or https, e.g. {example}"
        )
    if "@" in parts.netloc:
        raise CapabilityError(
            f"capability {declared!r} contains credentials ('user@'); no credentials in "
            f"capability URLs: the broker adds authentication, e.g. {example}"
        )
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise CapabilityError(
            f"capability {declared!r} has a query or fragment; a capability names an "
            f"origin and path prefix only, e.g. {example}/v1"
        )
    host_text = parts.netloc
    if host_text.startswith("["):
        host_text, _, _ = host_text[1:].partition("]")
        host_text = f"[{host_text}]"
    else:
        host_text = host_text.rpartition(":")[0] if ":" in host_text else host_text
    try:
        port = parts.port
    except ValueError as exc:
        raise CapabilityError(
            f"invalid port in capability {declared!r} ({exc}); use a number from 1 to "
            f"65535, e.g. {example}:8443"
        ) from exc
    if port is None:
        port = _DEFAULT_PORTS[parts.scheme]
    elif not 1 <= port <= 65535:
        raise CapabilityError(
            f"port {port} in capability {declared!r} is out of range; use a number from 1 to 65535"
        )
    host, wildcard = _parse_host(host_text, declared)
    return NetHttpCapability(
        parts.scheme,
        host,
        port,
        _parse_url_path(parts.path, declared),
        declared,
        wildcard=wildcard,
    )


def _parse_host(text: str, declared: str) -> tuple[str, bool]:
    """Normalise the host: IP literal, ``*.suffix`` wildcard or DNS name."""
    if not text:
        raise CapabilityError(
            f"capability {declared!r} has no host; e.g. net.http:https://api.example.com"
        )
    if text.startswith("["):
        inner = text[1:-1]
        try:
            address = ipaddress.IPv6Address(inner)
        except ValueError as exc:
            raise CapabilityError(
                f"invalid IPv6 address {text!r} in capability {declared!r}; write it as "
                f"[2001:db8::1]"
            ) from exc
        # Kept in brackets so that str() renders a valid URL.
        return f"[{address.compressed}]", False
    if not text.isascii():
        # The spelling the broker computes (IDNA 2008 with UTS 46, ``_broker._urls``), not
        # Python's 'idna' codec (IDNA 2003), which maps 'straße.de' to 'strasse.de', another
        # domain (attack32). Imported here: only a host that is not ASCII needs it.
        import idna

        try:
            suggestion = f" ({idna.encode(text, uts46=True).decode('ascii')!r})"
        except (idna.IDNAError, UnicodeError):
            suggestion = ""
        raise CapabilityError(
            f"host {text!r} in capability {declared!r} is not ASCII; write the punycode "
            f"'xn--' form{suggestion}"
        )
    host = text.lower()
    if host.endswith("."):
        host = host[:-1]
    try:
        return str(ipaddress.IPv4Address(host)), False
    except ValueError:
        pass
    wildcard = False
    if "*" in host:
        if host == "*":
            raise CapabilityError(
                f"capability {declared!r} uses a bare '*' host, which would reach every "
                f"host; name the host, e.g. net.http:https://api.example.com"
            )
        if not host.startswith("*.") or "*" in host[2:]:
            raise CapabilityError(
                f"capability {declared!r}: '*' is only allowed as the whole first label "
                f"of the host, e.g. net.http:https://*.example.com"
            )
        host = host[2:]
        wildcard = True
        if host.count(".") < 1:
            raise CapabilityError(
                f"capability {declared!r}: wildcard suffix {host!r} must have at least two "
                f"labels ('*.{host}' would reach every site under a top-level domain); "
                f"e.g. net.http:https://*.example.com"
            )
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL_RE.fullmatch(label) for label in labels):
        raise CapabilityError(
            f"invalid host {host!r} in capability {declared!r}; expected a DNS name of "
            f"labels of 1-63 letters, digits or hyphens (not at either end), at most 253 "
            f"characters, or an IP address"
        )
    if labels[-1].isdigit():
        # getaddrinfo() reads "127.1" or "2130706433" as IPv4 addresses; no
        # top-level domain is numeric, so such a name is a disguised address.
        raise CapabilityError(
            f"host {host!r} in capability {declared!r} looks like a malformed IPv4 address; "
            f"write the address in dotted-quad form (127.0.0.1) or use a DNS name"
        )
    if wildcard:
        _refuse_public_suffix(host, declared)
    return host, wildcard


def _refuse_public_suffix(host: str, declared: str) -> None:
    """Refuse ``*.host`` when ``host`` is a public suffix (``*.co.uk``, ``*.github.io``)."""
    try:
        public = is_public_suffix(host)
    except Exception as exc:  # the list failed to load or to answer: refuse, and say so
        raise CapabilityError(
            f"capability {declared!r}: cannot check whether {host!r} is a public suffix "
            f"({type(exc).__name__}: {exc}); name the host instead of a wildcard, "
            f"e.g. net.http:https://api.{host}"
        ) from exc
    if public:
        raise CapabilityError(
            f"capability {declared!r}: wildcard suffix {host!r} is a public suffix (on the "
            f"Public Suffix List: the names under it belong to whoever registers one), so "
            f"'*.{host}' would reach sites of unrelated owners; name the host, or a wildcard "
            f"under a domain you control, e.g. net.http:https://*.example.{host}"
        )


def _parse_url_path(path: str, declared: str) -> str:
    """``""`` for no prefix; otherwise ``/a/b`` without ``.``, ``//`` or trailing slash."""
    segments = [s for s in path.split("/") if s]
    for segment in segments:
        decoded = urllib.parse.unquote(segment)
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            raise CapabilityError(
                f"path prefix {path!r} in capability {declared!r} contains a '.', '..' or "
                f"encoded slash segment; write the prefix plainly, e.g. /v1/items"
            )
    return "".join(f"/{s}" for s in segments)


# -- env.read / proc.exec ------------------------------------------------------------
