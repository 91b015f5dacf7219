"""Atomic replacement and the cross-process lock that update and recovery share."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from caplet._atomic import atomic_write, exclusive_lock


def test_atomic_write_replaces_with_the_mode_and_no_leftovers(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    atomic_write(target, b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_exclusive_lock_is_refused_while_another_process_holds_it(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from pathlib import Path
                from caplet._atomic import exclusive_lock
                with exclusive_lock(Path({str(lock)!r})):
                    print("held", flush=True)
                    sys.stdin.readline()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with exclusive_lock(lock, blocking=False) as held:
            assert held is False
        holder.kill()  # SIGKILL: the kernel drops the lock with the process
        holder.wait()
    with exclusive_lock(lock, blocking=False) as held:
        assert held is True
