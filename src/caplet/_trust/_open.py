"""Choosing the trust store: one function for every place that names one.

``CAPLET_STORE``, the ``store=`` argument of :class:`~caplet.PluginManager`
and :class:`~caplet.PluginHost`, and the policy file's ``store`` key
(issue 15) all go through :func:`open_store`, so an address means the same
thing wherever it is written:

* ``postgresql://…`` or ``postgres://…`` (any libpq connection URL): the
  shared :class:`~caplet._trust._postgres.PostgresStore` of a fleet;
* ``sqlite:///ABSOLUTE/DIR`` or a plain path: the
  :class:`~caplet._trust._sqlite.SqliteStore` in that state directory;
* ``""`` or ``"sqlite"``: the SQLite store in the node's state directory
  (the default, and what an unset ``CAPLET_STORE`` means).

PostgreSQL's modules are imported only when such an address is opened, so
a node without the ``caplet[postgres]`` extra never loads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from caplet._errors import StoreError
from caplet._trust._pg_url import is_postgres_url, redact
from caplet._trust._sqlite import SqliteStore
from caplet._trust._store import TrustStore

__all__ = [
    "STORE_ENV",
    "describe_store",
    "is_shared",
    "open_store",
    "sqlite_directory",
    "store_address",
    "store_from_environment",
]

#: The environment variable naming the store (the address, as :func:`open_store` takes it).
STORE_ENV = "CAPLET_STORE"


def sqlite_directory(address: str | Path, state_dir: Path) -> Path | None:
    """The state directory of the SQLite store *address* names; ``None`` for a shared store.

    Checks the syntax as :func:`open_store` does, without opening anything
    (``caplet doctor --check-state`` must not create a database).
    """
    if isinstance(address, Path):
        return address
    text = address.strip()
    if is_postgres_url(text):
        return None
    if text in ("", "sqlite"):
        return state_dir
    if text.startswith("sqlite://"):
        path = text.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise StoreError(
                f"store {redact(text)!r}: a sqlite:// address names an absolute state directory "
                "(sqlite:///var/lib/caplet); write it with three slashes"
            )
        return Path(path)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"store {redact(text)!r}: caplet has no store of kind {scheme!r}; use "
            "postgresql://USER@HOST/DATABASE (a fleet's shared store) or a state directory "
            "(sqlite:///PATH, or a plain path)"
        )
    return Path(text)


def open_store(address: str | Path, *, state_dir: Path | None = None) -> TrustStore:
    """Open the store *address* names (see the module docstring).

    *state_dir* is the node's state directory, used by ``""`` and
    ``"sqlite"``. Raises :class:`StoreError` naming the address (without
    its password) when it cannot be understood or opened.
    """
    text = address.strip() if isinstance(address, str) else ""
    if is_postgres_url(text):
        from caplet._trust._postgres import PostgresStore

        return PostgresStore(text)
    if text in ("", "sqlite") and not isinstance(address, Path) and state_dir is None:
        raise StoreError(
            f"store {text or '(default)'!r} is the SQLite store of a state directory, and "
            "none was given; pass state_dir or write sqlite:///ABSOLUTE/STATE/DIR"
        )
    directory = sqlite_directory(address, state_dir if state_dir is not None else Path())
    assert directory is not None
    return SqliteStore(directory)


def store_address(configured: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The address in force when no ``store=`` argument names one: ``CAPLET_STORE`` when
    it is set, else *configured* (the policy file's ``store``), else ``""`` (the state
    directory's SQLite database). The environment wins, as it does for every tool
    that reads both, so one node of a fleet can be pointed elsewhere for a migration."""
    env = os.environ if environ is None else environ
    named = env.get(STORE_ENV, "")
    if named.strip():
        return named
    return configured or ""


def store_from_environment(
    state_dir: Path, environ: Mapping[str, str] | None = None, *, configured: str | None = None
) -> TrustStore:
    """The store :func:`store_address` picks, opened (SQLite in *state_dir* by default)."""
    return open_store(store_address(configured, environ), state_dir=state_dir)


def is_shared(address: str) -> bool:
    """True when *address* names a store other nodes can share (PostgreSQL)."""
    return is_postgres_url(address.strip())


def describe_store(address: str) -> str:
    """*address* fit for a message or a report (no password)."""
    return redact(address.strip())
