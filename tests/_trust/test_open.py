"""open_store: one address syntax for CAPLET_STORE, store= and the policy file's store key."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._errors import StoreError
from caplet._trust._open import (
    describe_store,
    is_shared,
    open_store,
    store_address,
    store_from_environment,
)
from caplet._trust._postgres import PostgresStore
from caplet._trust._sqlite import DB_FILENAME, SqliteStore


def test_default_and_sqlite_are_the_state_directory(tmp_path: Path) -> None:
    for address in ("", "sqlite", "  "):
        store = open_store(address, state_dir=tmp_path / "a")
        assert isinstance(store, SqliteStore)
        store.close()
    assert (tmp_path / "a" / DB_FILENAME).exists()
    with pytest.raises(StoreError, match="none was given; pass state_dir"):
        open_store("")


def test_paths_and_sqlite_urls(tmp_path: Path) -> None:
    for address in (tmp_path / "p", str(tmp_path / "s"), f"sqlite://{tmp_path / 'u'}"):
        store = open_store(address)
        assert isinstance(store, SqliteStore)
        store.close()
    for name in ("p", "s", "u"):
        assert (tmp_path / name / DB_FILENAME).exists()
    with pytest.raises(StoreError, match="names an absolute state directory"):
        open_store("sqlite://relative/dir")


def test_unknown_kind_is_refused_without_its_password() -> None:
    with pytest.raises(StoreError) as info:
        open_store("mysql://root:hunter2@db/caplet")
    assert "caplet has no store of kind 'mysql'" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_postgres_urls_open_the_shared_store(pg_url: str, tmp_path: Path) -> None:
    store = open_store(pg_url, state_dir=tmp_path)
    assert isinstance(store, PostgresStore)
    store.close()
    assert not (tmp_path / DB_FILENAME).exists()
    assert is_shared(pg_url)
    assert not is_shared(str(tmp_path))


def test_caplet_store_chooses(pg_url: str, tmp_path: Path) -> None:
    store = store_from_environment(tmp_path, {"CAPLET_STORE": pg_url})
    assert isinstance(store, PostgresStore)
    store.close()
    local = store_from_environment(tmp_path, {})
    assert isinstance(local, SqliteStore)
    local.close()


def test_describe_store_hides_the_password() -> None:
    assert describe_store("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"


def test_the_environment_wins_over_the_policy_file_and_blank_means_unset() -> None:
    configured = "postgresql://caplet@db/caplet"
    assert store_address(configured, {"CAPLET_STORE": "/srv/caplet"}) == "/srv/caplet"
    assert store_address(configured, {"CAPLET_STORE": "  "}) == configured
    assert store_address(configured, {}) == configured
    assert store_address(None, {}) == ""
