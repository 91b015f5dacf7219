"""The cpu controller caps the rate at which a worker uses CPU (``cpu_cores``).

``cpu_s`` bounds how much CPU a worker spends in all, not how fast: before
this, a plugin's threads (or its processes) spun every core of the host
between its calls until the count ran out. The kernel says when it held a
worker back (``nr_throttled`` in its cgroup's ``cpu.stat``), which is what
these tests read: no timing.
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from caplet._host._host import PluginHost
from caplet._host._policy import Policy
from caplet._sandbox._cgroup import CgroupRoot
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher, isolation_report
from tests._sandbox.seccompkit import call, fool_the_review, rate_cgroup, write_plugin
from tests.conftest import NEEDS_CGROUP, DelegatingLauncher

SPIN = """
import threading
import time


def create_functions(config):
    def spin(threads, seconds):
        # Each thread spins ``seconds`` of its own CPU time.
        def work():
            start = time.thread_time()
            while time.thread_time() - start < seconds:
                pass

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return "done"

    return {"probe": {"spin": spin}}
"""


def _spinner(tmp_path: Path, cpu_millicores: int | None) -> WorkerSpec:
    snapshot = tmp_path / "spinner"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(SPIN), encoding="utf-8")
    spec = WorkerSpec(
        plugin="spinner",
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={},
        modules={"probe": ("spin",)},
        workdir=tmp_path,
    )
    return dataclasses.replace(spec, cpu_millicores=cpu_millicores)


def _quota(directory: Path) -> str:
    if (directory / "cpu.max").exists():  # cgroup v2
        return (directory / "cpu.max").read_text(encoding="ascii").strip()
    quota = (directory / "cpu.cfs_quota_us").read_text(encoding="ascii").strip()
    period = (directory / "cpu.cfs_period_us").read_text(encoding="ascii").strip()
    return f"{'max' if quota == '-1' else quota} {period}"


def _throttled(directory: Path) -> int:
    for row in (directory / "cpu.stat").read_text(encoding="ascii").splitlines():
        key, _, value = row.partition(" ")
        if key == "nr_throttled":
            return int(value)
    raise AssertionError(f"no nr_throttled in {directory}/cpu.stat")


@NEEDS_CGROUP
def test_a_worker_cannot_use_cpu_faster_than_its_cpu_cores(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    # Two threads spinning 0.15 CPU seconds each against a fifth of a core:
    # without the cap they ran on two cores at once, and the kernel never
    # held the worker back.
    with launcher.start(_spinner(tmp_path, 200)) as worker:
        rate = rate_cgroup(worker.pid)
        assert rate.name.startswith(("spare-", "worker-")), rate
        assert _quota(rate) == "20000 100000"
        assert worker.call("probe", "spin", (2, 0.15), {}, timeout_s=60) == "done"
        assert _throttled(rate) > 0


@NEEDS_CGROUP
def test_the_default_rate_is_one_core_and_none_leaves_it_uncapped(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    default = WorkerSpec(
        plugin="x", snapshot_dir=tmp_path, entry="plugin.py", config={}, modules={}, workdir=None
    )
    assert default.cpu_millicores == 1000
    with launcher.start(_spinner(tmp_path, None)) as worker:
        rate = rate_cgroup(worker.pid)
        assert _quota(rate) == "max 100000"
        assert worker.call("probe", "spin", (2, 0.05), {}, timeout_s=60) == "done"
        assert _throttled(rate) == 0


@NEEDS_CGROUP
def test_doctor_says_the_cpu_rate_is_capped_per_worker() -> None:
    assert (
        isolation_report()
        .details["cpu rate"]
        .startswith(
            "capped per worker: the cpu controller holds all its threads and processes to cpu_cores"
        )
    )


def test_doctor_says_what_bounds_cpu_without_a_cpu_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As an unprivileged user without a delegated cgroup: cpu_s alone.
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "cgroup")
    assert isolation_report().details["cpu rate"] == (
        "a worker's CPU rate is not capped: its threads and processes may use every core until "
        "their CPU seconds (cpu_s, counted over all of them where a cgroup counts) run out (no "
        "cpu controller: disabled by CAPLET_TEST_DISABLE_LAYERS (test-only))"
    )


class _Recording(DelegatingLauncher):
    """The module's launcher, keeping each spec it was asked to start."""

    def __init__(self, inner: SandboxLauncher) -> None:
        super().__init__(inner)
        self.specs: list[WorkerSpec] = []

    def start(self, spec: WorkerSpec) -> Any:
        self.specs.append(spec)
        return self.inner.start(spec)


@NEEDS_CGROUP
def test_the_policy_sets_the_rate_of_plugin_and_guest_workers(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    write_plugin(plugins_dir, "spinner", "def spin():\n    return 'done'\n", ("spin",))
    recording = _Recording(launcher)
    policy = Policy(cpu_cores=0.25, guest={"cpu_cores": 0.5, "pool_size": 0})  # type: ignore[arg-type]
    with PluginHost(plugins_dir, state_dir=state_dir, policy=policy, launcher=recording) as host:
        fool_the_review(host, "spinner")
        assert host.enable("spinner", consent=True)
        assert call(host, "spinner", "spin") == "done"
        pid = host.worker_pid("spinner")
        assert pid is not None
        assert _quota(rate_cgroup(pid)) == "25000 100000"
        assert host.exec("1 + 1").value == 2
    rates = {spec.plugin: spec.cpu_millicores for spec in recording.specs}
    assert rates == {"spinner": 250, "guest": 500}


@contextmanager
def _capped_cgroup(share_us: int) -> Iterator[SandboxLauncher]:
    """A zygote started in a cgroup v1 cpu cgroup capped at ``share_us`` of 100 ms:
    where a container capped in CPU (docker --cpus on cgroup v1) runs caplet."""
    hierarchy = Path("/sys/fs/cgroup/cpu").resolve()
    own = next(
        line.split(":", 2)[2]
        for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
        if "cpu" in line.split(":", 2)[1].split(",")
    )
    home = hierarchy / own.lstrip("/")
    container = hierarchy / f"caplet-test-container-{os.getpid()}"
    container.mkdir()
    sandbox = SandboxLauncher(strict=True)
    try:
        (container / "cpu.cfs_quota_us").write_text(f"{share_us}\n", encoding="ascii")
        (container / "cgroup.procs").write_text(f"{os.getpid()}\n", encoding="ascii")
        try:
            assert sandbox.cpu_rate_problem() == ""  # the zygote starts in that cgroup
        finally:
            (home / "cgroup.procs").write_text(f"{os.getpid()}\n", encoding="ascii")
        yield sandbox
    finally:
        sandbox.close()
        container.rmdir()


@NEEDS_CGROUP
@pytest.mark.skipif(
    not (Path("/sys/fs/cgroup/cpu") / "cpu.cfs_quota_us").exists(), reason="cgroup v1's cpu"
)
def test_a_container_capped_below_the_rate_still_starts_workers_at_its_cap(
    tmp_path: Path,
) -> None:
    # cgroup v1 refuses a child's quota above an ancestor's share (v2 takes
    # the smaller): in a container capped at half a core, the default rate of
    # one core made every worker's cgroup fail, so no plugin started at all
    # ("creating the worker's cgroups failed: Invalid argument (EINVAL)").
    for name in ("small", "none"):
        (tmp_path / name).mkdir()
    with _capped_cgroup(50_000) as sandbox:
        with sandbox.start(_spinner(tmp_path, 1000)) as worker:
            assert _quota(rate_cgroup(worker.pid)) == "50000 100000"
            assert worker.call("probe", "spin", (1, 0.01), {}, timeout_s=60) == "done"
        # Near misses: a rate below the container's is the worker's own, and
        # "no limit" is the container's cap (the kernel's hierarchy holds it).
        with sandbox.start(_spinner(tmp_path / "small", 200)) as worker:
            assert _quota(rate_cgroup(worker.pid)) == "20000 100000"
        with sandbox.start(_spinner(tmp_path / "none", None)) as worker:
            assert _quota(rate_cgroup(worker.pid)) == "max 100000"


@NEEDS_CGROUP
@pytest.mark.skipif(
    not (Path("/sys/fs/cgroup/cpu") / "cpu.cfs_quota_us").exists(), reason="cgroup v1's cpu"
)
def test_a_container_capped_below_a_millisecond_per_period_still_takes_workers() -> None:
    # attack16: a container capped at 9 ms a second (systemd's CPUQuota=0.9% with
    # CPUQuotaPeriodSec=1s) is 0.9 ms of each 100 ms, below the kernel's smallest
    # quota (1 ms): the clamp rounded the worker's quota up to 1 ms of 100 ms, above
    # the container's share, and cgroup v1 refused it (EINVAL): no worker started.
    # The worker's period is lengthened instead (at most the kernel's longest, 1 s).
    # The worker's own cgroup as the sandbox makes it, under a real capped parent (a
    # zygote started at under 1% of a core would take minutes to answer).
    container = Path("/sys/fs/cgroup/cpu").resolve() / f"caplet-test-slow-{os.getpid()}"
    container.mkdir()
    try:
        (container / "cpu.cfs_period_us").write_text("1000000\n", encoding="ascii")
        (container / "cpu.cfs_quota_us").write_text("9000\n", encoding="ascii")
        root = CgroupRoot(None, None, None, container)
        seen: dict[int | None, str] = {}
        for rate in (1000, 5, None):
            worker = root.create(
                f"worker-{rate}", processes=None, memory_bytes=None, cpu_millicores=rate
            )
            assert worker.rate is not None
            seen[rate] = _quota(worker.rate)
            assert worker.remove()
        # A spare's cgroup is limited again for its request: from the long period
        # to "no limit" (the default period) and back.
        spare = root.create("spare", processes=None, memory_bytes=None, cpu_millicores=1000)
        assert spare.rate is not None
        spare.limit(processes=None, memory_bytes=None, cpu_millicores=None)
        seen[-1] = _quota(spare.rate)
        spare.limit(processes=None, memory_bytes=None, cpu_millicores=2000)
        seen[-2] = _quota(spare.rate)
        assert spare.remove()
        # Near misses: a share the 100 ms period can hold keeps that period, and
        # "no limit" is the container's cap (the kernel's hierarchy holds it).
        (container / "cpu.cfs_quota_us").write_text("30000\n", encoding="ascii")
        worker = root.create("worker-held", processes=None, memory_bytes=None, cpu_millicores=1000)
        assert worker.rate is not None
        seen[0] = _quota(worker.rate)
        assert worker.remove()
    finally:
        for child in container.iterdir():
            if child.is_dir():  # left by a failed assertion: empty, no process joined it
                child.rmdir()
        container.rmdir()
    assert seen == {
        1000: "9000 1000000",
        5: "5000 1000000",
        None: "max 100000",
        -1: "max 100000",
        -2: "9000 1000000",
        0: "3000 100000",
    }
