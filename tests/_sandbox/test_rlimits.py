"""rlimits on the real kernel, applied in a child interpreter and observed from here."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from caplet._errors import SandboxError
from caplet._sandbox._rlimits import ResourceLimits, rlimits_available

_PRELUDE = """
import errno, json, os, resource, signal, sys
from caplet._sandbox._rlimits import ResourceLimits, apply_rlimits

ARGS = json.loads(sys.argv[1])

def attempt(action):
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    except MemoryError:
        return "MemoryError"
    return "ok"

def done(result):
    print(json.dumps(result))
"""


def _start(script: str, **args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", _PRELUDE + textwrap.dedent(script), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _run(script: str, **args: object) -> dict[str, object]:
    proc = _start(script, **args)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_defaults_and_validation() -> None:
    limits = ResourceLimits()
    assert (limits.memory_mb, limits.cpu_s, limits.open_files) == (512, 60, 256)
    assert (limits.processes, limits.file_size_mb) == (None, 64)
    with pytest.raises(SandboxError, match="memory_mb must be a positive integer or None"):
        ResourceLimits(memory_mb=0)
    with pytest.raises(SandboxError, match="open_files must be a positive integer, got -1"):
        ResourceLimits(open_files=-1)
    with pytest.raises(SandboxError, match="cpu_s"):
        ResourceLimits(cpu_s=True)


def test_the_probe_sees_rlimits() -> None:
    assert rlimits_available() is True


def test_a_large_allocation_fails_with_memory_error() -> None:
    result = _run(
        """
        import mmap
        # Reserving (not touching) 1 GiB of address space shows the room was there.
        before = attempt(lambda: mmap.mmap(-1, 1 << 30).close())
        apply_rlimits(ResourceLimits(memory_mb=256))
        done({
            "before": before,
            "as": list(resource.getrlimit(resource.RLIMIT_AS)),
            "allocate": attempt(lambda: bytearray(1 << 30)),
            "reserve": attempt(lambda: mmap.mmap(-1, 1 << 30).close()),
            "small": attempt(lambda: bytearray(1 << 20)),
        })
        """
    )
    limit = 256 * 1024 * 1024
    assert result == {
        "before": "ok",
        "as": [limit, limit],
        "allocate": "MemoryError",
        "reserve": "ENOMEM",
        "small": "ok",
    }


def test_writing_beyond_the_file_size_limit_fails_with_efbig(tmp_path: Path) -> None:
    result = _run(
        """
        # The worker keeps SIGXFSZ ignored (CPython's default) so the write fails
        # with EFBIG instead of the signal killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        apply_rlimits(ResourceLimits(file_size_mb=1))

        def fill():
            with open(ARGS["path"], "wb") as handle:
                for _ in range(3):
                    handle.write(b"\\0" * (1024 * 1024))

        done({"fill": attempt(fill), "size": os.path.getsize(ARGS["path"])})
        """,
        path=f"{tmp_path}/big.bin",
    )
    assert result == {"fill": "EFBIG", "size": 1024 * 1024}


def test_opening_more_than_open_files_fails_with_emfile() -> None:
    result = _run(
        """
        apply_rlimits(ResourceLimits(open_files=64))
        opened = []
        try:
            while len(opened) < 1000:
                opened.append(os.dup(0))
        except OSError as exc:
            error = errno.errorcode[exc.errno]
        else:
            error = None
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
        done({"error": error, "highest": max(opened), "nofile": nofile})
        """
    )
    assert result == {"error": "EMFILE", "highest": 63, "nofile": [64, 64]}


def test_core_dumps_are_off_and_nproc_is_set_only_when_asked() -> None:
    result = _run(
        """
        _, core_hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (core_hard, core_hard))
        nproc_before = resource.getrlimit(resource.RLIMIT_NPROC)
        core_before = resource.getrlimit(resource.RLIMIT_CORE)
        apply_rlimits(ResourceLimits())
        nproc_default = resource.getrlimit(resource.RLIMIT_NPROC)
        apply_rlimits(ResourceLimits(processes=50))
        done({
            "core_before": core_before[0] != 0,
            "core": resource.getrlimit(resource.RLIMIT_CORE),
            "nproc_untouched": nproc_default == nproc_before,
            "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
        })
        """
    )
    assert result == {
        "core_before": True,
        "core": [0, 0],
        "nproc_untouched": True,
        "nproc": [50, 50],
    }


def test_a_hard_limit_is_never_raised() -> None:
    result = _run(
        """
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        apply_rlimits(ResourceLimits(open_files=256, file_size_mb=64))
        done({
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
            "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
        })
        """
    )
    assert result == {"nofile": [40, 40], "fsize": [4096, 4096]}


def test_a_cpu_spin_is_killed() -> None:
    proc = _start(
        """
        apply_rlimits(ResourceLimits(cpu_s=1))
        print("spinning", flush=True)
        while True:
            pass
        """
    )
    assert proc.stdout.strip() == "spinning"
    # soft == hard: the kernel's hard-limit check comes first, so SIGKILL (SIGXCPU otherwise).
    assert proc.returncode in (-signal.SIGKILL, -signal.SIGXCPU), proc.stderr


def test_pending_signals_are_bounded() -> None:
    # A red-team plugin queued 96363 real-time signals to itself (blocked), the
    # whole of root's RLIMIT_SIGPENDING as charged up the user-namespace tree
    # (kernel/ucount.c): sigqueue(3) then failed with EAGAIN for host root.
    result = _run(
        """
        apply_rlimits(ResourceLimits())
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
        for _ in range(5000):
            os.kill(os.getpid(), signal.SIGRTMIN)
        queued = [l.split()[1] for l in open("/proc/self/status") if l.startswith("SigQ:")][0]
        done({"queued": int(queued.split("/")[0])})
        """
    )
    queued = result["queued"]
    assert isinstance(queued, int)
    assert queued <= 1024
