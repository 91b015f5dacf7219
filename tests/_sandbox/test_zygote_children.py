"""The zygote's live children: what it answers for them, at a bounded rate.

A real child under a notifying seccomp filter sends its listener here, and
this test plays the zygote's loop with a :class:`_Children` and a clock it
moves itself (no sleep): the notifications the zygote answers for one
worker are bounded per second, since each costs the zygote's one loop
(outside every worker's cgroup and CPU count) and every other worker's
start waits behind it (attack13).
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time

import pytest

from caplet._sandbox._seccomp import SERVE_BATCH, DenialCounter
from caplet._sandbox._zygote_children import NOTIFY_RATE, _Children

#: Denied calls, each of which waits for the supervisor's answer.
CHILD = """
import ctypes, errno, json, os, socket, sys
from caplet._sandbox._seccomp import SYSCALL_NUMBERS, apply_seccomp

libc = ctypes.CDLL(None, use_errno=True)
handover = socket.socket(fileno=int(sys.argv[1]))
listener = apply_seccomp(allow_exec=False, notify=True)
socket.send_fds(handover, [b"listener"], [listener])
os.close(listener)
handover.close()
refused = 0
for _ in range(int(sys.argv[2])):
    ctypes.set_errno(0)
    if libc.syscall(ctypes.c_long(SYSCALL_NUMBERS[os.uname().machine]["ptrace"]), -1, 0, 0, 0) < 0:
        refused += ctypes.get_errno() == errno.EPERM
print(json.dumps(refused))
"""


class _Clock:
    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


def _children() -> _Children:
    return _Children()


def _serve_until(children: _Children, fd: int, stop: object) -> None:
    """The zygote's loop for one listener, until ``stop()`` says so."""
    assert callable(stop)
    while not stop():
        ready = dict(children.poller.poll(60_000))
        assert ready, "the child neither made a denied call nor was paused"
        children.serve_listener(fd)


def test_a_worker_flooding_denied_calls_is_answered_at_a_bounded_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On main the zygote answered as fast as a worker made denied calls:
    # 386,629 in 5 s from two threads, 2.6 of the zygote's CPU seconds.
    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)  # the module reads time.monotonic
    calls = NOTIFY_RATE + 3 * SERVE_BATCH
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        child = subprocess.Popen(
            [sys.executable, "-I", "-c", CHILD, str(theirs.fileno()), str(calls)],
            pass_fds=(theirs.fileno(),),
            stdout=subprocess.PIPE,
            text=True,
        )
        _, fds, _, _ = socket.recv_fds(ours, 64, 1)
    children = _children()
    listener = fds[0]
    counter = DenialCounter(listener)
    children.listeners[listener] = counter
    children.poller.register(listener, select.POLLIN)
    try:
        _serve_until(
            children,
            listener,
            lambda: (
                listener in children.paused
                or counter.counts.get("ptrace", 0) >= NOTIFY_RATE + SERVE_BATCH
            ),
        )
        answered = counter.counts["ptrace"]
        assert NOTIFY_RATE <= answered < NOTIFY_RATE + SERVE_BATCH, answered
        assert children.wait_ms(None) == 1000  # the loop wakes when the second is over
        assert children.poller.poll(0) == [], "paused: the waiting child is not served"
        children.resume_paused()
        assert listener in children.paused, "the second is not over yet"
        clock.now += 1.0
        children.resume_paused()
        assert listener not in children.paused
        _serve_until(children, listener, lambda: counter.counts["ptrace"] == calls)
        stdout, _ = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
        counter.close()
    assert json.loads(stdout) == calls, "every denied call was refused with EPERM"
    assert child.returncode == 0


def test_a_listener_going_away_while_paused_is_forgotten() -> None:
    # The near miss of the pause's bookkeeping: a worker reaped while its
    # listener is paused leaves nothing polled or paused behind.
    children = _children()
    read_end, write_end = os.pipe()
    children.poller.register(read_end, select.POLLIN)
    children.paused[read_end] = time.monotonic() + 1.0
    children.poller.unregister(read_end)
    children._unpause(read_end)
    assert children.paused == {}
    children.poller.register(read_end, select.POLLIN)
    children._unpause(read_end)  # not paused: no longer polled
    os.write(write_end, b"x")
    assert children.poller.poll(0) == []
    os.close(read_end)
    os.close(write_end)
