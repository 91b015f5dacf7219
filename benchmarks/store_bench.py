"""The trust store under load: SQLite and PostgreSQL side by side (issue 18).

    python benchmarks/store_bench.py            # print the table
    python benchmarks/store_bench.py --write    # also rewrite docs/benchmarks.md and docs/fleet.md
    python benchmarks/store_bench.py --postgres postgresql://...   # an existing server

One run measures, on both backends, through the store's own API (every
operation its own transaction, as the host makes them):

* approvals/s: ``put_approval`` of distinct plugins, from one process and
  from four processes at once (four nodes, or four processes of one node);
* log rows/s: ``log_decision``, from one process and from four at once;
* quarantine reads/s: ``get_quarantine``, what a warm worker's state
  refresh costs (once per ``Policy.state_refresh_s`` per plugin).

Without ``--postgres`` it starts a throw-away PostgreSQL server of its own
(tests/pgserver.py: initdb and pg_ctl in a temporary directory, a unix
socket, default durability: ``fsync`` and ``synchronous_commit`` on).
SQLite runs as caplet runs it (WAL, ``synchronous=NORMAL``) in a temporary
state directory. Processes open their store before a common start (a
barrier), so connecting and process start-up are not counted. Nothing
here is asserted anywhere: tests/benchmarks/test_store_bench.py only runs
it small to keep it working.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.pgserver, when run as a script

from caplet._audit._model import Verdict  # noqa: E402
from caplet._findings import RiskLevel  # noqa: E402
from caplet._trust._open import open_store  # noqa: E402
from caplet._trust._store import ApprovalRecord, Decision, TrustStore  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"
BEGIN = "<!-- store_bench:begin -->"
END = "<!-- store_bench:end -->"
FLEET = REPO / "docs" / "fleet.md"
FLEET_BEGIN = "<!-- fleet-figures:begin -->"
FLEET_END = "<!-- fleet-figures:end -->"
PROCESSES = 4


def _approval(name: str) -> ApprovalRecord:
    return ApprovalRecord(
        name=name,
        content_hash="sha256-" + "a" * 64,
        capabilities=("net.http:https://api.example.com", "env.read:TOKEN"),
        approved_at=time.time(),
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        version="1.0.0",
        requires=(),
    )


def _work(kind: str, store: TrustStore, prefix: str, count: int) -> None:
    if kind == "approve":
        for index in range(count):
            store.put_approval(_approval(f"{prefix}-{index}"))
    elif kind == "log":
        for index in range(count):
            store.log_decision(
                Decision(time.time(), prefix, "call", f"main.run#{index}", True, "benchmark")
            )
    elif kind == "quarantine-read":
        for _ in range(count):
            store.get_quarantine(prefix)
    else:
        raise ValueError(kind)


def _open(address: str, state_dir: str) -> TrustStore:
    return open_store(address, state_dir=Path(state_dir))


def _process(
    kind: str, address: str, state_dir: str, prefix: str, count: int, barrier: Barrier
) -> None:
    store = _open(address, state_dir)
    try:
        barrier.wait()
        _work(kind, store, prefix, count)
    finally:
        store.close()


def _rate(kind: str, address: str, state_dir: str, count: int, processes: int) -> float:
    """Operations per second of *kind*, *count* in all, spread over *processes*."""
    tag = f"{kind}-{processes}-{time.monotonic_ns()}"
    if processes == 1:
        store = _open(address, state_dir)
        try:
            _work(kind, store, f"{tag}-warm", min(20, count))  # first use: caches, pool
            started = time.perf_counter()
            _work(kind, store, tag, count)
            return count / (time.perf_counter() - started)
        finally:
            store.close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    each = count // processes
    children = [
        context.Process(
            target=_process, args=(kind, address, state_dir, f"{tag}-{i}", each, barrier)
        )
        for i in range(processes)
    ]
    for child in children:
        child.start()
    barrier.wait()
    started = time.perf_counter()
    for child in children:
        child.join()
    elapsed = time.perf_counter() - started
    failed = [c.exitcode for c in children if c.exitcode != 0]
    if failed:
        raise RuntimeError(f"a benchmark process failed (exit codes {failed})")
    return each * processes / elapsed


@dataclass(frozen=True)
class Row:
    label: str
    sqlite: float
    postgres: float


@contextlib.contextmanager
def _postgres(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tests.pgserver import running_server

    with running_server() as server:
        yield server.new_database()


def measure(count: int, postgres_url: str | None) -> list[Row]:
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="caplet-store-bench-") as scratch,
        _postgres(postgres_url) as pg,
    ):
        sqlite_dir = str(Path(scratch) / "state")
        plan: list[tuple[str, str, int, int]] = [
            ("approvals/s, 1 process", "approve", count, 1),
            (f"approvals/s, {PROCESSES} processes", "approve", count, PROCESSES),
            ("log rows/s, 1 process", "log", count, 1),
            (f"log rows/s, {PROCESSES} processes", "log", count, PROCESSES),
            ("quarantine reads/s, 1 process", "quarantine-read", count * 4, 1),
        ]
        for label, kind, n, processes in plan:
            lite = _rate(kind, "sqlite", sqlite_dir, n, processes)
            post = _rate(kind, pg, sqlite_dir, n, processes)
            rows.append(Row(label, lite, post))
            print(f"  {label}: SQLite {lite:,.0f}, PostgreSQL {post:,.0f}", file=sys.stderr)
    return rows


def table(rows: list[Row], count: int) -> str:
    machine = (
        f"{platform.machine()}, {multiprocessing.cpu_count()} cores, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}; run "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {count} operations per row "
        f"(reads: {count * 4})."
    )
    lines = [
        f"Machine: {machine}",
        "",
        "| operation | SQLite (WAL) | PostgreSQL 15 (unix socket) | PostgreSQL / SQLite |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.label} | {row.sqlite:,.0f} | {row.postgres:,.0f} | "
            f"{row.postgres / row.sqlite:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def _replace_between(doc: Path, begin: str, end: str, text: str) -> bool:
    current = doc.read_text(encoding="utf-8")
    if begin not in current or end not in current:
        return False
    head, _, rest = current.partition(begin)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{begin}\n{text}{end}{tail}", encoding="utf-8")
    return True


def write_doc(text: str, doc: Path = DOC) -> None:
    """The table into docs/benchmarks.md (its own section) and docs/fleet.md."""
    _replace_between(FLEET, FLEET_BEGIN, FLEET_END, text)
    if not _replace_between(doc, BEGIN, END, text):
        current = doc.read_text(encoding="utf-8")
        section = f"{BEGIN}\n{text}{END}"
        heading = (
            "\n## Trust store: SQLite and PostgreSQL (`benchmarks/store_bench.py`)\n\n"
            "What docs/fleet.md quotes. `python benchmarks/store_bench.py --write` "
            "rewrites this section.\n\n"
        )
        doc.write_text(current.rstrip("\n") + "\n" + heading + section + "\n", encoding="utf-8")


def main(argv: list[str] | None = None, out: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="operations per measurement")
    parser.add_argument("--postgres", metavar="URL", help="use this server instead of a new one")
    parser.add_argument(
        "--write", action="store_true", help="rewrite docs/benchmarks.md and docs/fleet.md"
    )
    args = parser.parse_args(argv)
    rows = measure(args.count, args.postgres)
    text = table(rows, args.count)
    out(text)
    if args.write:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
