"""The SQLite store used from several threads of one process (one host, many callers).

Every thread starts its writes together (a Barrier), so the statements and
transactions of different threads really do overlap on the one connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from caplet._trust._sqlite import SqliteStore
from caplet._trust._store import Decision

THREADS = 8
ROUNDS = 40


@pytest.fixture
def store(state_dir: Path) -> Iterator[SqliteStore]:
    with SqliteStore(state_dir) as opened:
        yield opened


def run_together(work: Callable[[int], None], threads: int = THREADS) -> None:
    """Run ``work(index)`` in ``threads`` threads released at once; re-raise the first error."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]


def test_a_store_opened_in_one_thread_is_used_from_another(store: SqliteStore) -> None:
    decision = Decision(at=1.0, plugin="p", action="call", target="m.f", allowed=True)
    run_together(lambda _: store.log_decision(decision), threads=1)
    assert [d.target for d in store.decisions("p")] == ["m.f"]


def test_writes_and_reads_from_many_threads_lose_nothing(store: SqliteStore) -> None:
    def work(index: int) -> None:
        plugin = f"p{index}"
        for n in range(ROUNDS):
            store.log_decision(
                Decision(at=float(n), plugin=plugin, action="call", target=str(n), allowed=True)
            )
            written = store.kv_put(plugin, f"k{n}", bytes([n]), max_keys=1000, max_bytes=10**6)
            assert written.stored
            assert store.kv_get(plugin, f"k{n}") == bytes([n])
            assert len(store.kv_keys(plugin)) == n + 1

    run_together(work)
    for index in range(THREADS):
        plugin = f"p{index}"
        logged = store.decisions(plugin, limit=1000)
        assert sorted(int(d.target) for d in logged) == list(range(ROUNDS))
        assert sorted(store.kv_keys(plugin)) == sorted(f"k{n}" for n in range(ROUNDS))
    assert len(store.decisions(limit=10_000)) == THREADS * ROUNDS
    assert store.integrity_check() == ("ok",)


def test_a_quota_checked_inside_the_transaction_holds_across_threads(
    store: SqliteStore,
) -> None:
    """Each kv_put counts the plugin's keys and inserts in one transaction; if
    another thread's insert could land between the two, more keys than the
    quota would be stored."""
    stored: list[str] = []
    lock = threading.Lock()

    def work(index: int) -> None:
        for n in range(ROUNDS):
            key = f"t{index}-{n}"
            if store.kv_put("shared", key, b"v", max_keys=50, max_bytes=10**6).stored:
                with lock:
                    stored.append(key)

    run_together(work)
    assert len(stored) == 50
    assert sorted(store.kv_keys("shared")) == sorted(stored)
