"""Records and raw access the SQLite store's tests share (test_sqlite, test_sqlite_file)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TypedDict

from caplet._audit._model import Verdict
from caplet._findings import RiskLevel
from caplet._trust._store import ApprovalRecord

HASH_A = "sha256-" + "a" * 64
HASH_B = "sha256-" + "b" * 64


def approval(name: str = "weather", content_hash: str = HASH_A) -> ApprovalRecord:
    return ApprovalRecord(
        name=name,
        content_hash=content_hash,
        capabilities=("net.http:https://api.example.com", "env.read:TOKEN"),
        approved_at=1_700_000_000.5,
        risk_level=RiskLevel.MEDIUM,
        verdict=Verdict.APPROVE_WITH_CONDITIONS,
    )


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection to the database file, outside the store."""
    return sqlite3.connect(path, isolation_level=None)


class KvLimits(TypedDict):
    """The quota arguments of ``kv_put``, spread into it (``**limits``)."""

    max_keys: int
    max_bytes: int
