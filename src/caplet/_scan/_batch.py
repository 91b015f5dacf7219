"""Many scan targets at once: one job per target, on every core, one progress count.

``caplet scan A B C``, a directory of sdists and a requirements file all come
down to a list of :class:`Job`\\ s (a path, its declared capabilities, its
mode). :func:`scan_jobs` runs them in separate processes (``jobs`` at a
time; the scanner is CPU-bound Python, so threads would share one core) and
calls ``progress(done, total)`` as each target finishes, so the CLI can
show one bar for the whole batch. Reports come back in the order of the
jobs. One job, or ``jobs=1``, runs in this process.

Workers are started with ``spawn``: a forked copy of a CLI process would
carry its threads (a progress bar's refresher) into a child that cannot
run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from caplet._capabilities._model import Capability
from caplet._errors import ScanError
from caplet._scan._archive import detect_format
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._scanner import scan_tree

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["Job", "archives_in", "default_jobs", "scan_jobs"]


@dataclass(frozen=True, slots=True)
class Job:
    """One target of a batch: what to scan, with which capabilities, in which mode."""

    path: Path
    capabilities: tuple[Capability, ...] = ()
    mode: ScanMode = ScanMode.PACKAGE
    #: What the user called it (a path, a requirement line), for the report.
    label: str = ""


def default_jobs() -> int:
    """Every core this process may use."""
    return max(1, len(os.sched_getaffinity(0)))


def archives_in(directory: Path) -> list[Path] | None:
    """The sdists and wheels of a directory holding only distributions, else ``None``.

    A directory with any Python file in it is a source tree (scanned as one
    target); one whose files are all archives is a folder of downloads, each
    of them a package of its own.
    """
    archives: list[Path] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return None
    for entry in entries:
        if entry.is_symlink() or not entry.is_file():
            return None
        if detect_format(entry) is None:
            return None
        archives.append(entry)
    return archives or None


def _scan(job: Job) -> ScanReport:
    return scan_tree(job.path, job.capabilities, mode=job.mode)


def scan_jobs(
    jobs: Sequence[Job],
    *,
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[ScanReport]:
    """Scan every job, ``workers`` at a time; reports in the order of ``jobs``.

    Raises the first job's :class:`ScanError` (a target that cannot be
    scanned at all), after the others finished or were cancelled.
    """
    if workers < 1:
        raise ScanError(f"--jobs must be a positive number of processes, got {workers}")
    total = len(jobs)
    if workers == 1 or total <= 1:
        reports = []
        for done, job in enumerate(jobs, start=1):
            reports.append(_scan(job))
            if progress is not None:
                progress(done, total)
        return reports
    # Imported here: `caplet scan PATH` asks archives_in about its one target, and a
    # process pool is only needed for several (issue 16: the start-up budget).
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    results: dict[int, ScanReport] = {}
    with ProcessPoolExecutor(max_workers=min(workers, total), mp_context=context) as pool:
        futures: dict[Future[ScanReport], int] = {
            pool.submit(_scan, job): index for index, job in enumerate(jobs)
        }
        try:
            for done, future in enumerate(as_completed(futures), start=1):
                results[futures[future]] = future.result()
                if progress is not None:
                    progress(done, total)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [results[index] for index in range(total)]
