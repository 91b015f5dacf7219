"""Eight concurrent ``caplet`` processes on one state directory lose nothing (issue 8, point 4).

Eight workers (threads of this test) each run real ``python -m caplet``
processes back to back, against one state directory, one plugins directory
and one lock file, cycling through every command that writes state:
approve, lock, a plugin call that writes ``ctx.kv``, a deliberately refused
call and a refused enable (each logs one denial), log, unapprove. Every
worker owns one plugin (``own-<i>``), so the approval it must find at the end
follows from what it did; all share ``counter`` and ``shared-bad``, so the
decision log and the kv table are written by everyone at once. Afterwards:
no approval, lock entry, kv key or log line is missing, no process saw
"database is locked" (or any unexpected exit code), and ``caplet doctor
--check-state`` passes. The state directory does not exist when the eight
start, so creating the database races too.

Duration: ``CAPLET_STRESS_SECONDS`` when set; else 60 s when ``CI`` is set
(read when this module is imported, before the suite's fixtures clear
``CI``), else 10 s for local runs. It is how long workers keep *starting*
commands; nothing here asserts on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from caplet._trust._hashing import tree_hash
from caplet._trust._lockfile import read_lockfile
from caplet._trust._sqlite import SqliteStore
from tests.conftest import PluginFactory

WORKERS = 8
_STRESS_ENV = os.environ.get("CAPLET_STRESS_SECONDS", "")
STRESS_SECONDS = float(_STRESS_ENV) if _STRESS_ENV else 60.0 if os.environ.get("CI") else 10.0

OWN = """
def create_functions(config):
    def put(ctx, key):
        ctx.kv.set(key, key)
        return key

    return {"main": {"put": put}}
"""

COUNTER = """
from caplet.plugin import Refused


def create_functions(config):
    def put(ctx, key):
        ctx.kv.set(key, key)
        return key

    def refuse(key):
        raise Refused(f"refused on purpose: {key}")

    return {"main": {"put": put, "refuse": refuse}}
"""

BAD = """
import subprocess


def create_functions(config):
    def run():
        return subprocess.run(["sh", "-c", "id"], check=False).returncode

    return {"main": {"run": run}}
"""

#: What no process may ever print: SQLite's busy error, caplet's busy-timeout
#: message, a traceback.
UNWANTED = ("database is locked", "stayed locked", "Traceback")

#: One cycle of a worker; each starts at a different offset, so that at any
#: moment different commands run side by side.
STEPS = ("approve", "lock", "put-own", "put-counter", "refuse", "enable-bad", "log", "unapprove")


@dataclass
class Worker:
    """One worker's model of what its commands must have done."""

    index: int
    approved: bool = False
    locked: bool = False
    own_keys: list[str] = field(default_factory=list)
    counter_keys: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    commands: int = 0

    @property
    def plugin(self) -> str:
        return f"own-{self.index}"


class Stress:
    def __init__(self, plugins_dir: Path, state_dir: Path, lockfile: Path) -> None:
        self.options = [
            "--plugins-dir",
            str(plugins_dir),
            "--state-dir",
            str(state_dir),
        ]
        self.lockfile = lockfile
        self.env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}

    def caplet(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "caplet", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
            check=False,
        )

    def step(self, worker: Worker, step: str, serial: int) -> None:
        name = worker.plugin
        key = f"w{worker.index}-{serial}"
        expected, reason = 0, ""
        if step == "approve":
            result = self.caplet("approve", name, "--yes", "--json", *self.options)
        elif step == "lock":
            result = self.caplet(
                "lock", name, "--yes", "--json", "--lockfile", str(self.lockfile), *self.options
            )
            expected = 0 if worker.approved else 1
        elif step == "put-own":
            result = self.caplet(
                # --yes: the plugin may or may not be approved at this moment.
                "call",
                "--enable",
                name,
                "main.put",
                json.dumps(key),
                "--yes",
                "--json",
                *self.options,
            )
        elif step == "put-counter":
            result = self.caplet(
                "call",
                "--enable",
                "counter",
                "main.put",
                json.dumps(key),
                "--yes",
                "--json",
                *self.options,
            )
        elif step == "refuse":
            result = self.caplet(
                "call",
                "--enable",
                "counter",
                "main.refuse",
                json.dumps(key),
                "--yes",
                "--json",
                *self.options,
            )
            expected, reason = 1, f"refused on purpose: {key}"
        elif step == "enable-bad":
            result = self.caplet("enable", "shared-bad", "--json", *self.options)
            expected, reason = 1, "danger finding"
        elif step == "log":
            result = self.caplet("log", "--json", "-n", "5", *self.options)
        else:
            assert step == "unapprove"
            result = self.caplet("unapprove", name, "--json", *self.options)
            expected = 0 if worker.approved else 1
        worker.commands += 1
        output = result.stdout + result.stderr
        surfaced = [text for text in UNWANTED if text in output]
        if result.returncode != expected or surfaced or reason not in output:
            worker.failures.append(
                f"{step} by worker {worker.index}: exit {result.returncode} (expected {expected})"
                f"\n{output}"
            )
            return
        worker.counts[f"{step} exit {result.returncode}"] += 1
        if result.returncode != 0:
            return
        if step == "approve":
            worker.approved = True
        elif step == "unapprove":
            worker.approved = False
        elif step == "lock":
            worker.locked = True
        elif step == "put-own":
            worker.own_keys.append(key)
        elif step == "put-counter":
            worker.counter_keys.append(key)

    def run(self, worker: Worker, deadline: float) -> None:
        serial = 0
        position = worker.index % len(STEPS)
        while time.monotonic() < deadline and not worker.failures:
            self.step(worker, STEPS[position], serial)
            serial += 1
            position = (position + 1) % len(STEPS)


@pytest.mark.slow
def test_eight_processes_lose_no_approval_lock_entry_kv_key_or_log_line(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    for index in range(WORKERS):
        make_plugin(f"own-{index}", source=OWN, modules='[modules.main]\nfunctions = ["put"]\n')
    make_plugin(
        "counter", source=COUNTER, modules='[modules.main]\nfunctions = ["put", "refuse"]\n'
    )
    make_plugin("shared-bad", source=BAD)
    lockfile = tmp_path / "caplet.lock"
    stress = Stress(plugins_dir, state_dir, lockfile)
    workers = [Worker(index) for index in range(WORKERS)]
    deadline = time.monotonic() + STRESS_SECONDS
    threads = [
        threading.Thread(target=stress.run, args=(worker, deadline), name=f"worker-{worker.index}")
        for worker in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    failures = [failure for worker in workers for failure in worker.failures]
    assert not failures, "\n\n".join(failures)
    assert all(worker.commands >= 1 for worker in workers)

    with SqliteStore(state_dir) as store:
        for worker in workers:
            name = worker.plugin
            approval = store.get_approval(name)
            if worker.approved:
                assert approval is not None, f"the approval of {name} was lost"
                assert approval.content_hash == tree_hash(plugins_dir / name)
            else:
                assert approval is None, f"{name} was unapproved, yet an approval remains"
            # ctx.kv belongs to the plugin's name and place (decide14).
            place = str((plugins_dir / name).resolve())
            assert store.kv_keys(name, location=place) == sorted(worker.own_keys)
            log = store.decisions(name, limit=100_000)
            actions = Counter(d.action for d in log if d.allowed)
            assert actions["approve"] == worker.counts["approve exit 0"]
            assert actions["unapprove"] == worker.counts["unapprove exit 0"]
            assert actions["lock"] == worker.counts["lock exit 0"]
            assert actions["enable"] == worker.counts["put-own exit 0"]
        counter = str((plugins_dir / "counter").resolve())
        assert store.kv_keys("counter", location=counter) == sorted(
            key for worker in workers for key in worker.counter_keys
        )
        refusals = [d for d in store.decisions("counter", limit=100_000) if d.action == "call"]
        assert all(not d.allowed and d.target == "main.refuse" for d in refusals)
        assert len(refusals) == sum(worker.counts["refuse exit 1"] for worker in workers)
        denials = [d for d in store.decisions("shared-bad", limit=100_000) if not d.allowed]
        assert all(d.action == "enable" for d in denials)
        assert len(denials) == sum(worker.counts["enable-bad exit 1"] for worker in workers)

    lock = read_lockfile(lockfile, missing_ok=True)
    assert sorted(lock.names) == sorted(worker.plugin for worker in workers if worker.locked)
    for entry in lock.entries:
        assert entry.digest == tree_hash(plugins_dir / entry.name)

    doctor = stress.caplet("doctor", "--check-state", "--json", *stress.options)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["ok"] is True
