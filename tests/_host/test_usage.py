"""A worker's CPU seconds and peak memory from /proc, its children included."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from caplet._host._usage import WorkerUsage, _parse_cpu

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
