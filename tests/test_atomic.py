"""Atomic replacement and the cross-process lock that update and recovery share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from caplet._atomic import (
    KILL_AT_WRITE_ENV,
    WRITE_TRACE_ENV,
    NotRegularFileError,
    atomic_write,
    exclusive_lock,
    leftover_temp_files,
    read_regular,
)


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


# -- leftovers and the test-only fault hooks ---------------------------------------------------


def test_leftover_temp_files_are_those_atomic_write_names(tmp_path: Path) -> None:
    for name in (
        ".caplet.lock.ab_12xyz.tmp",  # a killed write of caplet.lock
        ".hello.json.k2j3h4g5.tmp",
        ".caplet.lock.tmp",  # not ours: no random part
        "caplet.lock",
        ".hidden",
    ):
        (tmp_path / name).write_text("x")
    (tmp_path / ".dir.abcdefgh.tmp").mkdir()
    assert leftover_temp_files(tmp_path) == [
        tmp_path / ".caplet.lock.ab_12xyz.tmp",
        tmp_path / ".hello.json.k2j3h4g5.tmp",
    ]
    assert leftover_temp_files(tmp_path, "caplet.lock") == [tmp_path / ".caplet.lock.ab_12xyz.tmp"]
    assert leftover_temp_files(tmp_path / "missing") == []


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from caplet._atomic import atomic_write
    atomic_write(Path(sys.argv[1]), b"new")
    """
)


def _write_in_a_process(target: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WRITER, str(target)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_write_trace_names_every_step(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    trace = tmp_path / "trace"
    result = _write_in_a_process(target, **{WRITE_TRACE_ENV: str(trace)})
    assert result.returncode == 0, result.stderr
    assert trace.read_text().splitlines() == [
        f"1 atomic_write {target}: temporary file created",
        f"2 atomic_write {target}: temporary file written and synced",
        f"3 atomic_write {target}: renamed into place",
        f"4 atomic_write {target}: directory synced",
    ]
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize(
    ("step", "content", "leftover"), [(1, b"old", True), (2, b"old", True), (3, b"new", False)]
)
def test_kill_at_write_kills_at_that_step_and_leaves_old_or_new(
    tmp_path: Path, step: int, content: bytes, leftover: bool
) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    result = _write_in_a_process(target, **{KILL_AT_WRITE_ENV: str(step)})
    assert result.returncode == -signal.SIGKILL
    assert target.read_bytes() == content
    assert bool(leftover_temp_files(tmp_path)) is leftover


def test_the_hooks_are_inert_unless_set(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    result = _write_in_a_process(target, **{KILL_AT_WRITE_ENV: "not a number"})
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == b"new"
    assert os.environ.get(KILL_AT_WRITE_ENV) is None
    atomic_write(target, b"again")  # in this process: no hook, no counting
    assert target.read_bytes() == b"again"


def test_read_regular_reads_a_regular_file_up_to_one_byte_past_its_limit(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"abc")
    assert read_regular(small, 3) == b"abc"
    assert read_regular(small, 2) == b"abc", "one byte past the limit says: too large"
    assert read_regular(small, 1) == b"ab"


def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    # attack10: a name checked by lstat may be swapped for a link (followed by
    # a plain open) or a FIFO (a plain open waits for a writer forever).
    target = tmp_path / "target"
    target.write_text("secret")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for name in ("link", "fifo", "folder"):
        with pytest.raises(NotRegularFileError) as raised:
            read_regular(tmp_path / name, 100)
        assert raised.value.filename == str(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing", 100)
