"""Scans fanned out on a real Dask LocalCluster: one package per task, one report as a local scan.

The cluster (tests/conftest.py) runs two worker processes on 127.0.0.1; the
workers get each file's bytes with its task, scan them in a temporary
directory, and answer with the report rooted at the path given here.
"""

from __future__ import annotations

import io
import json
import socket
import tarfile
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import caplet._scan_cluster as cluster_module
from caplet._errors import ScanError
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._sarif import to_sarif
from caplet._scan._scanner import scan_tree
from caplet._scan_cluster import (
    ClusterTarget,
    _Parcel,
    _scan_parcel,
    scan_on_cluster,
    scan_target,
)
from caplet._version import __version__

#: Decoded data reaching exec: a threat, danger in package mode too.
DROPPER = 'import base64\nexec(base64.b64decode("cHJpbnQoMSk="))\n'


def sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


@pytest.fixture
def targets(tmp_path: Path) -> list[ClusterTarget]:
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "mod.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    paths = [
        sdist(tmp_path / "evil-1.0.tar.gz", {"evil-1.0/evil/__init__.py": DROPPER}),
        wheel(tmp_path / "fine-1.0-py3-none-any.whl", {"fine/__init__.py": "X = 1\n"}),
        tmp_path / "single.py",
        clean,
        sdist(tmp_path / "also-evil-2.0.tar.gz", {"also-evil-2.0/setup.py": DROPPER}),
    ]
    paths[2].write_text(DROPPER, encoding="utf-8")
    return [ClusterTarget(path) for path in paths]


def local(targets: list[ClusterTarget]) -> list[ScanReport]:
    return [scan_tree(t.path, t.capabilities, mode=t.mode) for t in targets]


def differences(remote: list[ScanReport], here: list[ScanReport]) -> list[str]:
    """Field by field, what differs between two lists of reports (for the assertion)."""
    found = []
    for a, b in zip(remote, here, strict=True):
        for name in a.__dataclass_fields__:
            if getattr(a, name) != getattr(b, name):
                found.append(f"{a.root}: {name}: {getattr(a, name)!r} != {getattr(b, name)!r}")
    return found


def test_cluster_reports_are_the_local_reports_in_target_order(
    dask_scheduler: str, targets: list[ClusterTarget]
) -> None:
    streamed: list[int] = []
    progress: list[tuple[int, int]] = []
    reports = scan_on_cluster(
        dask_scheduler,
        targets,
        scan_target,
        on_report=lambda index, _report: streamed.append(index),
        progress=lambda done, total: progress.append((done, total)),
    )
    assert reports == local(targets), differences(reports, local(targets))
    assert [r.root for r in reports] == [t.path.as_posix() for t in targets]
    assert [r.has_danger for r in reports] == [True, False, True, False, True]
    assert sorted(streamed) == list(range(len(targets)))
    assert progress[-1] == (len(targets), len(targets))
    assert [done for done, _ in progress] == list(range(1, len(targets) + 1))


def test_one_sarif_file_for_the_whole_fan_out(
    dask_scheduler: str, targets: list[ClusterTarget], tmp_path: Path
) -> None:
    reports = scan_on_cluster(dask_scheduler, targets, scan_target)
    remote = to_sarif(reports, tool_version=__version__, base=tmp_path)
    assert remote == to_sarif(local(targets), tool_version=__version__, base=tmp_path)
    (run,) = remote["runs"]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
    }
    assert "single.py" in uris
    assert any(uri.startswith("evil-1.0.tar.gz/") for uri in uris)
    assert "caplet-scan-" not in json.dumps(remote), "no worker's temporary path leaks"


def test_more_targets_than_the_window(dask_scheduler: str, tmp_path: Path) -> None:
    """Forty small packages through a window of four tasks: all back, in order."""
    paths = []
    for index in range(40):
        path = tmp_path / f"p{index:02}.py"
        path.write_text(DROPPER if index % 7 == 0 else f"X = {index}\n", encoding="utf-8")
        paths.append(ClusterTarget(path))
    reports = scan_on_cluster(dask_scheduler, paths, scan_target)
    assert [r.has_danger for r in reports] == [index % 7 == 0 for index in range(40)]


@dataclass(frozen=True)
class Refusing:
    """A target type of the caller's own, with a scan function that fails on one of them."""

    path: Path
    fail: bool = False


def scan_or_fail(target: Refusing, path: Path) -> ScanReport:
    if target.fail:
        raise ScanError(f"cannot scan {path}: refused for the test")
    return scan_tree(path, (), mode=ScanMode.PACKAGE)


def test_a_target_that_fails_is_a_scan_error_naming_it(dask_scheduler: str, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("X = 1\n", encoding="utf-8")
    bad.write_text("X = 2\n", encoding="utf-8")
    with pytest.raises(ScanError) as info:
        scan_on_cluster(dask_scheduler, [Refusing(good), Refusing(bad, fail=True)], scan_or_fail)
    message = str(info.value)
    assert message == f"cannot scan {bad.as_posix()}: refused for the test"


def test_a_missing_target_is_refused_before_anything_is_sent(
    dask_scheduler: str, tmp_path: Path
) -> None:
    with pytest.raises(ScanError, match=r"cannot scan .*/nope\.tar\.gz: No such file"):
        scan_on_cluster(dask_scheduler, [ClusterTarget(tmp_path / "nope.tar.gz")], scan_target)


def test_a_worker_running_another_caplet_is_refused(
    dask_scheduler: str, targets: list[ClusterTarget], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_module, "__version__", "0.0.0+elsewhere")
    with pytest.raises(ScanError) as info:
        scan_on_cluster(dask_scheduler, targets[:1], scan_target)
    message = str(info.value)
    assert f"runs caplet {__version__}, this is caplet 0.0.0+elsewhere" in message
    assert "install the same caplet on every worker" in message


def test_an_unreachable_scheduler_is_a_clear_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    with pytest.raises(ScanError) as info:
        scan_on_cluster(address, [ClusterTarget(Path(__file__))], scan_target, timeout_s=2)
    assert f"cannot reach the Dask scheduler at {address}" in str(info.value)
    assert "without --dask the scan runs on this machine" in str(info.value)


def test_no_targets_no_cluster() -> None:
    assert scan_on_cluster("tcp://127.0.0.1:1", [], scan_target) == []


# -- the task itself, as a worker runs it --------------------------------------------------------


def test_a_file_travels_as_its_bytes(tmp_path: Path) -> None:
    """The worker needs nothing but the bytes: the label's path does not exist there."""
    label = "/nowhere/on/the/worker/evil-1.0.tar.gz"
    archive = sdist(tmp_path / "evil-1.0.tar.gz", {"evil-1.0/evil/__init__.py": DROPPER})
    parcel = _Parcel(label=label, name=archive.name, data=archive.read_bytes())
    answer = _scan_parcel(parcel, ClusterTarget(archive), scan_target)
    assert answer.report.root == label
    assert answer.report.has_danger
    assert answer.version == __version__


def test_a_directory_the_worker_cannot_see_is_named(tmp_path: Path) -> None:
    parcel = _Parcel(label=str(tmp_path / "absent"), name="absent", data=None)
    with pytest.raises(ScanError) as info:
        _scan_parcel(parcel, ClusterTarget(tmp_path / "absent"), scan_target)
    assert "a directory is scanned in place, and that worker does not see it" in str(info.value)


def test_a_hostile_file_name_stays_in_the_scratch_directory(tmp_path: Path) -> None:
    escaped = Path(tempfile.gettempdir()) / f"caplet-escape-{uuid.uuid4().hex}.py"
    parcel = _Parcel(label="x", name=f"../{escaped.name}", data=DROPPER.encode())
    answer = _scan_parcel(parcel, ClusterTarget(tmp_path), scan_target)
    assert answer.report.files_scanned == 1
    assert answer.report.has_danger
    assert not escaped.exists()
    for name in ("..", ".", ""):
        dotted = _Parcel(label="x", name=name, data=b"X = 1\n")
        assert _scan_parcel(dotted, ClusterTarget(tmp_path), scan_target).report.root == "x"
