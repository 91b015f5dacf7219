"""A PostgreSQL store's address: parsed, shown without its password, and checked for TLS.

A shared store holds the approvals of a whole fleet: whoever can change
what a node reads from it can approve a plugin on every node. So before
caplet connects anywhere but this machine it insists that the connection
is encrypted *and* the server's certificate verified (libpq's
``sslmode=verify-full`` or ``verify-ca``): libpq's default, ``prefer``,
silently falls back to plain text, and ``require`` encrypts without
checking who answers, so a machine in the middle could serve forged
approvals (https://www.postgresql.org/docs/15/libpq-ssl.html, "SSL Mode
Descriptions"). A unix socket or a loopback address needs neither. An
operator who has another protection (a VPN, an SSH tunnel) says so with
``sslmode=disable``, which is accepted with a warning: the safe answer
wins unless someone chose otherwise, knowingly.

Addresses are whatever libpq accepts (a ``postgresql://`` URL or
``key=value`` pairs); ``PGHOST`` and ``PGSSLMODE`` count where the address
leaves them out, as they do for libpq.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from caplet._errors import StoreError
from caplet._logs import caplet_logger

__all__ = ["PgAddress", "is_postgres_url", "parse_address", "redact"]

logger = caplet_logger("caplet.store")

_SCHEMES = ("postgresql://", "postgres://")
#: libpq's modes that verify the server's certificate.
_VERIFIED = frozenset({"verify-ca", "verify-full"})
#: What :func:`redact` shows of an address it cannot parse.
_UNPARSED = "(not shown: it cannot be parsed and may hold a password)"
_PASSWORD_PAIR = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def is_postgres_url(text: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` URL."""
    return text.lower().startswith(_SCHEMES)


def redact(address: str) -> str:
    """*address* without its password, fit for messages and logs."""
    if "://" not in address:  # libpq's key=value form
        return _PASSWORD_PAIR.sub(r"\1***", address)
    try:
        parts = urlsplit(address)
    except ValueError:
        # A malformed host ("[::1" without its "]"): nothing of it can be told apart
        # from the password, so none of it is shown (the message says what is wrong).
        scheme = address.split("://", 1)[0]
        return f"{scheme}://{_UNPARSED}"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hosts}" if ":" in userinfo else f"{user}@{hosts}"
    query = urlencode(
        [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query)],
        safe="/:",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_URL_PASSWORD = re.compile(r"://[^/?#]*:[^/?#]*@|[?&]password=", re.IGNORECASE)


def _has_password(address: str) -> bool:
    """True when *address* may carry a password (user:password@, password=)."""
    if "://" not in address:
        return _PASSWORD_PAIR.search(address) is not None
    return _URL_PASSWORD.search(address) is not None


@dataclass(frozen=True, slots=True)
class PgAddress:
    """A checked address: ``conninfo`` for libpq, ``shown`` for messages."""

    conninfo: str
    shown: str
    hosts: tuple[str, ...]
    sslmode: str


def _is_local(host: str) -> bool:
    """A unix socket directory, ``localhost`` or a loopback address."""
    if not host or host.startswith(("/", "@")) or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_address(address: str, environ: Mapping[str, str] | None = None) -> PgAddress:
    """Parse *address* and refuse a remote server reached without a verified certificate."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    env = os.environ if environ is None else environ
    shown = redact(address)
    try:
        if shown.endswith(_UNPARSED):
            raise ProgrammingError("the URL cannot be parsed (a host in [ ] without its ])")
        params = conninfo_to_dict(address)
    except ProgrammingError as exc:
        # libpq quotes the token it could not parse, and that may be the password
        # ("invalid percent-encoded token" for a password holding '%'): its words are
        # shown only when the address holds no password (red-team round 3).
        why = str(exc).strip() if not _has_password(address) else "libpq cannot parse it"
        raise StoreError(
            f"store address {shown} is not a PostgreSQL connection string ({why}); write it "
            "as postgresql://USER@HOST:PORT/DATABASE?sslmode=verify-full (percent-encode a "
            "'%', '@', ':' or '/' in the password, or keep the password in PGPASSWORD or "
            "~/.pgpass)"
        ) from None
    raw_hosts = str(params.get("host") or params.get("hostaddr") or env.get("PGHOST", ""))
    hosts = tuple(h.strip() for h in raw_hosts.split(",")) if raw_hosts else ("",)
    sslmode = str(params.get("sslmode") or env.get("PGSSLMODE") or "prefer")
    remote = [h for h in hosts if not _is_local(h)]
    if remote and sslmode not in _VERIFIED:
        if sslmode == "disable":
            logger.warning(
                "PostgreSQL store %s: the connection to %s is not encrypted (sslmode=disable, "
                "as configured); anyone on the path can read and change approvals",
                shown,
                ", ".join(remote),
            )
        else:
            raise StoreError(
                f"store {shown}: the server {', '.join(remote)} is not on this machine and "
                f"sslmode={sslmode} does not verify its certificate, so a machine in the middle "
                "could forge approvals; add sslmode=verify-full (and sslrootcert=CA file) to the "
                "address, or, on a network protected otherwise, sslmode=disable"
            )
    return PgAddress(conninfo=address, shown=shown, hosts=hosts, sslmode=sslmode)
