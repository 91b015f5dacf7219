"""A shared store's address: remote servers only with a verified certificate; no password shown.

These run without a server: the address is refused before anything connects.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from caplet._errors import StoreError
from caplet._trust._pg_url import is_postgres_url, parse_address, redact

NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    "address",
    [
        "postgresql://caplet@db.example.com/caplet",  # libpq's default, prefer: may fall back
        "postgresql://caplet@db.example.com/caplet?sslmode=require",  # encrypted, unverified
        "postgresql://caplet@db.example.com/caplet?sslmode=allow",
        "postgresql://caplet@127.0.0.1,db.example.com/caplet",  # one remote host of two
        "host=10.1.2.3 dbname=caplet sslmode=prefer",
    ],
)
def test_a_remote_server_without_verified_tls_is_refused(address: str) -> None:
    with pytest.raises(StoreError) as info:
        parse_address(address, NO_ENV)
    message = str(info.value)
    assert "is not on this machine" in message
    assert "could forge approvals" in message
    assert "sslmode=verify-full" in message


def test_pgsslmode_and_pghost_count_where_the_address_is_silent() -> None:
    with pytest.raises(StoreError, match=r"db\.example\.com is not on this machine"):
        parse_address("dbname=caplet", {"PGHOST": "db.example.com"})
    accepted = parse_address(
        "postgresql://caplet@db.example.com/caplet", {"PGSSLMODE": "verify-full"}
    )
    assert accepted.sslmode == "verify-full"


@pytest.mark.parametrize(
    "address",
    [
        "postgresql://caplet@db.example.com/caplet?sslmode=verify-full",
        "postgresql://caplet@db.example.com/caplet?sslmode=verify-ca&sslrootcert=/etc/ca.pem",
        "postgresql://caplet@localhost/caplet",
        "postgresql://caplet@127.0.0.1:5433/caplet",
        "postgresql://caplet@[::1]/caplet",
        "postgresql://caplet@/caplet?host=/run/postgresql",
        "dbname=caplet",
    ],
)
def test_local_or_verified_servers_are_accepted(address: str) -> None:
    assert parse_address(address, NO_ENV).conninfo == address


def test_an_explicit_sslmode_disable_is_accepted_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="caplet.store"):
        parse_address("postgresql://caplet@db.example.com/caplet?sslmode=disable", NO_ENV)
    assert "is not encrypted (sslmode=disable, as configured)" in caplog.text


def test_passwords_never_reach_a_message() -> None:
    secret = "s3cr3t-pw"
    for address in (
        f"postgresql://caplet:{secret}@db.example.com/caplet",
        f"postgresql://caplet@db.example.com/caplet?password={secret}",
        f"host=db.example.com password={secret} dbname=caplet",
        f"host=db.example.com password='{secret} x' dbname=caplet",
    ):
        assert secret not in redact(address)
        with pytest.raises(StoreError) as info:
            parse_address(address, NO_ENV)
        assert secret not in str(info.value)
    assert redact("postgresql://caplet:pw@h/db") == "postgresql://caplet:***@h/db"


def test_garbage_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="is not a PostgreSQL connection string"):
        parse_address("postgresql://caplet@h/db?nosuchoption=1", NO_ENV)


def test_is_postgres_url() -> None:
    assert is_postgres_url("postgresql://x")
    assert is_postgres_url("POSTGRES://x")
    assert not is_postgres_url("/var/lib/caplet")
    assert not is_postgres_url("sqlite:///x")


@pytest.mark.parametrize(
    "address",
    [
        # A password holding '%' that is not percent-encoded: libpq's error quoted it.
        "postgresql://u:hun%ter2@127.0.0.1:1/db",
        "postgresql://u@127.0.0.1:1/db?password=hun%zzter2",
        # A malformed IPv6 host: urlsplit raised ValueError out of redact (exit 70).
        "postgresql://u:hunter2@[::1/db",
        "postgres://u:hunter2@[zz/db",
    ],
)
def test_a_malformed_address_is_a_store_error_that_never_shows_its_password(
    address: str,
) -> None:
    """Red-team round 3 (the policy file's ``store``, ``CAPLET_STORE``, ``--set store=``):
    both end up on a terminal, in CI logs and in the decision log's policy row."""
    shown = redact(address)
    assert "hunter2" not in shown
    assert "ter2" not in shown
    with pytest.raises(StoreError) as caught:
        parse_address(address, environ={})
    assert "ter2" not in str(caught.value)
    assert "not a PostgreSQL connection string" in str(caught.value)


def test_a_sqlite_address_with_a_password_never_shows_it() -> None:
    from caplet._trust._open import sqlite_directory

    with pytest.raises(StoreError) as caught:
        sqlite_directory("sqlite://root:hunter2@db/x", Path("/"))
    assert "hunter2" not in str(caught.value)
    assert "three slashes" in str(caught.value)
