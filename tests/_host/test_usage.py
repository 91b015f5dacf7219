"""A worker's CPU seconds and peak memory from /proc, its children included."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import BudgetExceededError, PluginHost, Policy
from caplet._host._budget import BudgetPolicy
from caplet._host._usage import WorkerUsage, _parse_cpu
from caplet._sandbox._cgroup import cpu_count
from tests._sandbox.seccompkit import fool_the_review, write_plugin
from tests.conftest import NEEDS_CGROUP

#: Burns CPU until it has used `seconds`, says so, then waits for stdin to close.
BURN = """
import sys, time
seconds = float(sys.argv[1])
start = time.process_time()
while time.process_time() - start < seconds:
    pass
big = bytearray(32 * 1024 * 1024)
big[::4096] = b"x" * len(big[::4096])
print("ready", flush=True)
sys.stdin.read()
"""
#: A parent that starts the burner as its child and waits with it.
PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {BURN!r}, sys.argv[1]], stdout=sys.stdout)
child.wait()
"""


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-c", PARENT, "0.2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    yield process
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout=30)
    process.stdout.close()


def test_a_tree_is_sampled_with_its_children(tree: subprocess.Popen[bytes]) -> None:
    usage = WorkerUsage(tree.pid)
    sample = usage.sample()
    assert sample is not None
    assert sample.cpu_s >= 0.2, "the child's CPU counts for the worker"
    assert sample.peak_bytes >= 32 * 1024 * 1024, "the child's peak resident set"
    again = usage.sample()
    assert again is not None
    assert again.cpu_s >= sample.cpu_s
    usage.close()
    assert usage.sample() is None, "closed: nothing more is read"


def test_a_worker_that_is_gone_reads_as_none() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    usage = WorkerUsage(process.pid)
    assert usage.sample() is not None or process.poll() is not None
    process.wait(timeout=30)
    assert usage.sample() is None
    usage.close()


@pytest.mark.parametrize(
    ("line", "cpu"),
    [
        (b"42 (python) S 1 1 1 0 -1 0 0 0 0 0 150 50 10 5 20 0 1 0 7 0 0", 2.15),
        # A process may name itself with spaces and parentheses: fields follow the last ')'.
        (b"42 (a) b) (c d) S 1 1 1 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 7 0 0", 1.0),
    ],
)
def test_stat_lines_are_parsed_after_the_last_parenthesis(line: bytes, cpu: float) -> None:
    assert _parse_cpu(line) == pytest.approx(cpu)


@pytest.mark.parametrize("line", [b"no parenthesis", b"1 (x) S 1 2", b"1 (x) S a b c d e f g h"])
def test_malformed_stat_lines_read_as_none(line: bytes) -> None:
    assert _parse_cpu(line) is None


#: A plugin that spins in a child process: ``wait`` False ignores SIGCHLD, so
#: the kernel reaps the child without adding its CPU time to the worker's
#: (the attack); True waits for it, as multiprocessing does (the near miss).
CHILD_BURNER = """
import signal, time

def burn(seconds, wait):
    if not wait:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        os.write(done_write, b"x")
        os._exit(0)
    os.close(done_write)
    os.read(done_read, 1)  # the child has spun its seconds
    if wait:
        os.waitpid(pid, 0)
    return "done"
"""


def _burner_host(plugins_dir: Path, state_dir: Path, cpu_s: float) -> PluginHost:
    write_plugin(plugins_dir, "burner", CHILD_BURNER, ("burn",))
    policy = Policy(budget=BudgetPolicy(cpu_s=cpu_s, window_s=3600))
    host = PluginHost(plugins_dir, state_dir=state_dir, policy=policy)
    fool_the_review(host, "burner")
    assert host.enable("burner", consent=True)
    return host


@NEEDS_CGROUP
def test_cpu_spent_in_a_child_the_worker_never_waits_for_is_charged(
    plugins_dir: Path, state_dir: Path
) -> None:
    # attack13: the budget read the worker's own /proc counters, which never
    # see a child reaped by the kernel for a parent that ignores SIGCHLD; on
    # main every call was admitted, 1.2 CPU seconds each, against a budget of 1.
    with _burner_host(plugins_dir, state_dir, cpu_s=1.0) as host:
        assert host.call("burner", "main.burn", 1.2, False) == "done"
        with pytest.raises(BudgetExceededError) as caught:
            host.call("burner", "main.burn", 1.2, False)
        (stats,) = host.observer.stats()
    assert str(caught.value).startswith("plugin 'burner': its cpu_s budget is spent")
    assert stats.cpu_s >= 1.2


@NEEDS_CGROUP
def test_cpu_of_a_child_the_worker_waits_for_is_charged_once(
    plugins_dir: Path, state_dir: Path
) -> None:
    # The near miss: a waited-for child was counted before (the worker's
    # cutime) and must not be counted twice now that its cgroup counts it too.
    with _burner_host(plugins_dir, state_dir, cpu_s=3.0) as host:
        for _ in range(2):
            assert host.call("burner", "main.burn", 0.6, True) == "done"
        (stats,) = host.observer.stats()
    assert 1.2 <= stats.cpu_s < 2.4, stats.cpu_s


def test_a_process_outside_any_worker_cgroup_has_no_cgroup_count() -> None:
    # The host's own cgroup (or the root) holds other processes: never read as a worker's.
    assert cpu_count(os.getpid()) is None
