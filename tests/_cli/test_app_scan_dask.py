"""caplet scan --dask ADDRESS: the report and SARIF of a local scan, from a real LocalCluster."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.crashkit import caplet
from tests.test_scan_cluster import DROPPER, sdist


def test_scan_on_the_cluster_matches_the_local_scan(dask_scheduler: str, tmp_path: Path) -> None:
    target = sdist(tmp_path / "evil-1.0.tar.gz", {"evil-1.0/evil/__init__.py": DROPPER})
    remote = caplet(
        ["scan", "--dask", dask_scheduler, str(target), "--sarif", "remote.sarif", "--json"],
        cwd=tmp_path,
    )
    here = caplet(["scan", str(target), "--sarif", "local.sarif", "--json"], cwd=tmp_path)
    assert remote.returncode == here.returncode == 1, remote.stderr  # danger found: exit 1
    assert json.loads(remote.stdout) == json.loads(here.stdout)
    assert json.loads(remote.stdout)["findings"], "the dropper is found"
    remote_sarif = json.loads((tmp_path / "remote.sarif").read_text(encoding="utf-8"))
    assert remote_sarif == json.loads((tmp_path / "local.sarif").read_text(encoding="utf-8"))


def test_an_unreachable_scheduler_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "x.py").write_text("X = 1\n", encoding="utf-8")
    result = caplet(
        ["scan", "--dask", f"tcp://127.0.0.1:{port}", str(tmp_path / "x.py")],
        env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},  # Dask's own setting
    )
    assert result.returncode == 1, result.stderr  # caplet's exit for an error it explains
    said = " ".join(result.stderr.split())
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in said
    assert "Traceback" not in result.stderr


def test_dask_scans_paths_only(dask_scheduler: str, tmp_path: Path) -> None:
    result = caplet(["scan", "--dask", dask_scheduler, "some-plugin-name"], cwd=tmp_path)
    assert result.returncode == 2
    assert "caplet scan --dask scans files and directories" in " ".join(result.stderr.split())
