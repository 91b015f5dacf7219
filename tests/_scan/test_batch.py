"""Many targets at once (caplet._scan._batch): every core, one progress count, reports in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._errors import ScanError
from caplet._findings import Severity
from caplet._scan._batch import Job, archives_in, scan_jobs
from tests._scan.index import sdist

DROPPER = 'import base64\nexec(base64.b64decode("cHJpbnQoMSk="))\n'


def package(root: Path, source: str) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(source)
    return root


@pytest.mark.parametrize("workers", [1, 2])
def test_reports_come_back_in_order_with_one_progress_count(tmp_path: Path, workers: int) -> None:
    targets = [
        package(tmp_path / "a", "x = 1\n"),
        package(tmp_path / "b", DROPPER),
        package(tmp_path / "c", "y = 2\n"),
    ]
    seen: list[tuple[int, int]] = []
    reports = scan_jobs(
        [Job(t) for t in targets], workers=workers, progress=lambda d, t: seen.append((d, t))
    )
    assert [r.root for r in reports] == [t.as_posix() for t in targets]
    assert [r.has_danger for r in reports] == [False, True, False]
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_target_that_cannot_be_scanned_stops_the_batch(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="no such file or directory"):
        scan_jobs([Job(tmp_path / "a"), Job(tmp_path / "missing")], workers=2)


def test_zero_workers_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="--jobs must be a positive number"):
        scan_jobs([Job(tmp_path)], workers=0)


def test_a_folder_of_sdists_is_a_batch_and_a_source_tree_is_not(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for name in ("a", "b"):
        (downloads / f"{name}-1.0.tar.gz").write_bytes(sdist(name, "1.0", {"x.py": "x = 1\n"}))
    assert archives_in(downloads) == sorted(downloads.iterdir())
    (downloads / "notes.py").write_text("x = 1\n")
    assert archives_in(downloads) is None
    assert archives_in(tmp_path / "nothing") is None


def test_findings_keep_their_severity_across_processes(tmp_path: Path) -> None:
    jobs = [Job(package(tmp_path / "a", DROPPER)), Job(package(tmp_path / "b", "x = 1\n"))]
    first, _ = scan_jobs(jobs, workers=2)
    assert {f.severity for f in first.findings if f.rule_id == "CPL-THR-001"} == {Severity.DANGER}
