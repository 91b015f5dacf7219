"""Process attacks that multiply: forking and starting threads until something refuses,
and children left running past the call's deadline.

Split out of :mod:`caplet._selftest._processes` (which runs programs and reaches other
processes) when it grew past 600 lines; the corpus lists these right after it, in the
same family, so the report's order is unchanged.
"""

from __future__ import annotations

from caplet._host._host import PluginHost
from caplet._selftest._checks import DEADLINE_MS, PROCESS_LIMIT, pids_events, timed_out
from caplet._selftest._model import (
    Arena,
    Attempt,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)

__all__ = ["CASES"]

FORK_BOMB = """
import time


def run(limit):
    # Bounded so a missing process limit cannot exhaust the machine's pids:
    # fork until the kernel refuses, and if it never does, hang so the
    # deadline has to kill the whole jail.
    read_end, write_end = os.pipe()
    forked = 0
    try:
        while forked < limit:
            if os.fork() == 0:
                try:
                    os.close(write_end)
                    os.read(read_end, 1)
                finally:
                    os._exit(0)
            forked += 1
    except OSError as exc:
        return {"forked": forked, "errno": errname(exc)}
    time.sleep(3600)
"""

THREAD_BOMB = """
import threading
import time


def run(limit):
    # Bounded like the fork bomb: threads count against the same pids limit.
    # Small stacks, so the address-space limit is not what runs out first.
    threading.stack_size(256 * 1024)
    gate = threading.Event()
    started = 0
    try:
        while started < limit:
            threading.Thread(target=gate.wait, daemon=True).start()
            started += 1
    except RuntimeError as exc:
        gate.set()
        return {"threads": started, "error": str(exc)}
    time.sleep(3600)
"""

FORK_AND_HANG = """
import time


def run(children):
    for _ in range(children):
        if os.fork() == 0:
            try:
                time.sleep(3600)
            finally:
                os._exit(0)
    time.sleep(3600)
"""


def fork_bomb_stopped(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    # RLIMIT_NPROC alone would not do: copy_process() exempts the initial
    # user namespace's root (INIT_USER), which a worker of a root host is.
    expect(attempt.enabled, attempt.describe())
    breach_unless(attempt.error is None, f"nothing refused a fork: {attempt.describe()}")
    value = attempt.value
    expect(isinstance(value, dict), attempt.describe())
    assert isinstance(value, dict)
    expect(value.get("errno") == "EAGAIN", attempt.describe())
    breach_unless(int(value.get("forked", 0)) < PROCESS_LIMIT, attempt.describe())
    events = pids_events(attempt.jail_pid)
    expect(events.get("max", 0) > 0, f"pids.max of the worker's cgroup did not refuse: {events}")


def thread_bomb_stopped(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled, attempt.describe())
    breach_unless(attempt.error is None, f"nothing refused a thread: {attempt.describe()}")
    value = attempt.value
    expect(isinstance(value, dict) and "threads" in value, attempt.describe())
    assert isinstance(value, dict)
    breach_unless(int(value["threads"]) < PROCESS_LIMIT, attempt.describe())
    events = pids_events(attempt.jail_pid)
    expect(events.get("max", 0) > 0, f"pids.max of the worker's cgroup did not refuse: {events}")


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "fork-bomb",
        Family.PROCESSES,
        f"fork in a loop (up to {4 * PROCESS_LIMIT} processes, then hang)",
        Layer.CGROUP,
        FORK_BOMB,
        fork_bomb_stopped,
        args=fixed_args(4 * PROCESS_LIMIT),
        timeout_ms=3000,
    ),
    HostileCase(
        "thread-bomb",
        Family.PROCESSES,
        f"start threads in a loop (up to {4 * PROCESS_LIMIT}, then hang)",
        Layer.CGROUP,
        THREAD_BOMB,
        thread_bomb_stopped,
        args=fixed_args(4 * PROCESS_LIMIT),
        timeout_ms=3000,
    ),
    HostileCase(
        "fork-and-hang",
        Family.PROCESSES,
        "fork 8 children that sleep, then sleep past the deadline",
        Layer.DEADLINE,
        FORK_AND_HANG,
        timed_out,
        args=fixed_args(8),
        timeout_ms=DEADLINE_MS,
    ),
)
