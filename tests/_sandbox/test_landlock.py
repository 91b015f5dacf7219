"""Landlock on the real kernel, observed from a child interpreter (never this process).

Each test runs ``python -I -c <script>``: the script imports what it needs,
calls :func:`apply_landlock`, tries things, and prints one JSON object of
outcomes ("ok" or the errno name) that the test checks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from caplet._sandbox._landlock import (
    ACCESS_FS_IOCTL_DEV,
    ACCESS_FS_REFER,
    ACCESS_FS_TRUNCATE,
    handled_fs_access,
    landlock_abi,
)
from caplet._syscall import landlock_abi_version

_PRELUDE = """
import errno, json, os, socket, sys
from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._landlock import apply_landlock

ARGS = json.loads(sys.argv[1])

def attempt(action):
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"

def read(path):
    with open(path, encoding="utf-8") as handle:
        handle.read()

def write(path, text="x"):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)

def done(result):
    print(json.dumps(result))
"""


def _run(script: str, **args: object) -> dict[str, object]:
    code = _PRELUDE + textwrap.dedent(script)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert isinstance(result, dict)
    return result


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, str]:
    """ro/ (with a file), rw/ (empty) and outside/ (a secret), all in tmp_path."""
    ro, rw, outside = tmp_path / "ro", tmp_path / "rw", tmp_path / "outside"
    for directory in (ro, rw, outside):
        directory.mkdir()
    (ro / "data.txt").write_text("public", encoding="utf-8")
    (outside / "secret.txt").write_text("secret", encoding="utf-8")
    (outside / "other.txt").write_text("other", encoding="utf-8")
    return {"ro": str(ro), "rw": str(rw), "outside": str(outside)}


def test_abi_probe_matches_the_syscall_layer() -> None:
    assert landlock_abi() == landlock_abi_version()
    assert landlock_abi() >= 1, "this machine offers Landlock; the probe must see it"


def test_handled_rights_grow_with_the_abi() -> None:
    assert handled_fs_access(0) == 0
    assert handled_fs_access(1) == (1 << 13) - 1  # the 13 rights of ABI 1
    assert handled_fs_access(2) == handled_fs_access(1) | ACCESS_FS_REFER
    assert handled_fs_access(3) == handled_fs_access(2) | ACCESS_FS_TRUNCATE
    assert handled_fs_access(4) == handled_fs_access(3)  # ABI 4 added network rights
    assert handled_fs_access(5) == handled_fs_access(4) | ACCESS_FS_IOCTL_DEV
    assert handled_fs_access(7) == handled_fs_access(5)


def test_reading_outside_the_grants_is_denied(tree: dict[str, str]) -> None:
    result = _run(
        """
        before = attempt(lambda: read(ARGS["outside"] + "/secret.txt"))
        apply_landlock([PathGrant(ARGS["ro"])])
        done({
            "before": before,
            "secret": attempt(lambda: read(ARGS["outside"] + "/secret.txt")),
            "list_root": attempt(lambda: os.listdir("/")),
            "etc_passwd": attempt(lambda: read("/etc/passwd")),
        })
        """,
        **tree,
    )
    assert result == {
        "before": "ok",
        "secret": "EACCES",
        "list_root": "EACCES",
        "etc_passwd": "EACCES",
    }


def test_read_only_grant_reads_but_never_writes(tree: dict[str, str]) -> None:
    result = _run(
        """
        ro = ARGS["ro"]
        apply_landlock([PathGrant(ro)])
        done({
            "read": attempt(lambda: read(ro + "/data.txt")),
            "list": attempt(lambda: os.listdir(ro)),
            "overwrite": attempt(lambda: write(ro + "/data.txt")),
            "create": attempt(lambda: write(ro + "/new.txt")),
            "mkdir": attempt(lambda: os.mkdir(ro + "/sub")),
            "delete": attempt(lambda: os.unlink(ro + "/data.txt")),
            "truncate": attempt(lambda: os.truncate(ro + "/data.txt", 0)),
        })
        """,
        **tree,
    )
    assert result == {
        "read": "ok",
        "list": "ok",
        "overwrite": "EACCES",
        "create": "EACCES",
        "mkdir": "EACCES",
        "delete": "EACCES",
        "truncate": "EACCES",
    }
    assert Path(tree["ro"], "data.txt").read_text(encoding="utf-8") == "public"


def test_writable_grant_allows_create_write_rename_delete(tree: dict[str, str]) -> None:
    result = _run(
        """
        rw = ARGS["rw"]
        apply_landlock([PathGrant(rw, writable=True)])
        steps = {
            "create": lambda: write(rw + "/a.txt", "hello"),
            "read": lambda: read(rw + "/a.txt"),
            "truncate": lambda: os.truncate(rw + "/a.txt", 2),
            "mkdir": lambda: os.mkdir(rw + "/sub"),
            "rename_into_subdir": lambda: os.rename(rw + "/a.txt", rw + "/sub/b.txt"),
            "delete": lambda: os.unlink(rw + "/sub/b.txt"),
            "rmdir": lambda: os.rmdir(rw + "/sub"),
            "keep": lambda: write(rw + "/kept.txt", "kept"),
        }
        done({name: attempt(step) for name, step in steps.items()})
        """,
        **tree,
    )
    assert set(result.values()) == {"ok"}, result
    assert sorted(os.listdir(tree["rw"])) == ["kept.txt"]


def test_dotdot_symlinks_and_hard_links_do_not_escape(tree: dict[str, str]) -> None:
    secret = tree["outside"] + "/secret.txt"
    Path(tree["rw"], "link").symlink_to(secret)
    Path(tree["ro"], "link").symlink_to(tree["outside"])
    result = _run(
        """
        rw, ro, secret = ARGS["rw"], ARGS["ro"], ARGS["secret"]
        apply_landlock([PathGrant(ro), PathGrant(rw, writable=True)])
        done({
            "dotdot": attempt(lambda: read(rw + "/../outside/secret.txt")),
            "old_symlink": attempt(lambda: read(rw + "/link")),
            "dir_symlink": attempt(lambda: os.listdir(ro + "/link")),
            "new_symlink": attempt(lambda: os.symlink(secret, rw + "/fresh")),
            "follow_new": attempt(lambda: read(rw + "/fresh")),
            "hard_link": attempt(lambda: os.link(secret, rw + "/hard")),
            "overwrite_via_link": attempt(lambda: write(rw + "/link")),
        })
        """,
        secret=secret,
        **tree,
    )
    assert result["dotdot"] == "EACCES"
    assert result["old_symlink"] == "EACCES"
    assert result["dir_symlink"] == "EACCES"
    # Making a symlink inside a writable grant is allowed; following it out is not.
    assert result["new_symlink"] == "ok"
    assert result["follow_new"] == "EACCES"
    assert result["hard_link"] in ("EACCES", "EXDEV")
    assert result["overwrite_via_link"] == "EACCES"
    assert Path(secret).read_text(encoding="utf-8") == "secret"


def test_a_grant_on_a_single_file(tree: dict[str, str]) -> None:
    (Path(tree["rw"]) / "log.txt").write_text("", encoding="utf-8")
    result = _run(
        """
        outside, rw = ARGS["outside"], ARGS["rw"]
        apply_landlock([
            PathGrant(outside + "/secret.txt"),
            PathGrant(rw + "/log.txt", writable=True),
        ])
        done({
            "granted": attempt(lambda: read(outside + "/secret.txt")),
            "sibling": attempt(lambda: read(outside + "/other.txt")),
            "write_ro_file": attempt(lambda: write(outside + "/secret.txt")),
            "write_rw_file": attempt(lambda: write(rw + "/log.txt", "line")),
            "create_next_to_it": attempt(lambda: write(rw + "/other.txt")),
        })
        """,
        **tree,
    )
    assert result == {
        "granted": "ok",
        "sibling": "EACCES",
        "write_ro_file": "EACCES",
        "write_rw_file": "ok",
        "create_next_to_it": "EACCES",
    }


@pytest.mark.security
def test_a_pinned_grant_swapped_for_a_link_is_refused(tree: dict[str, str], tmp_path: Path) -> None:
    # glob32: without a jail Landlock opened a plugin's grant by name, following links,
    # so a glob's match made a link after enable was ruled as the link's target.
    report = Path(tree["ro"]) / "q1.csv"
    report.write_text("a,b", encoding="utf-8")
    pinned = os.stat(report)
    report.unlink()
    report.symlink_to(Path(tree["outside"]) / "secret.txt")
    result = _run(
        """
        try:
            apply_landlock([PathGrant(ARGS["report"], device=ARGS["dev"], inode=ARGS["ino"])])
        except SandboxError as exc:
            error = str(exc)
        else:
            error = None
        done({"error": error, "secret": attempt(lambda: read(ARGS["report"]))})
        """,
        report=str(report),
        dev=pinned.st_dev,
        ino=pinned.st_ino,
    )
    assert result["error"] is not None
    assert "passes through a symbolic link" in str(result["error"])
    # Near miss: the same grant, unpinned (the runtime's), still follows its link.
    followed = _run(
        """
        apply_landlock([PathGrant(ARGS["report"])])
        done({"secret": attempt(lambda: read(ARGS["report"]))})
        """,
        report=str(report),
    )
    assert followed == {"secret": "ok"}


def test_tcp_is_denied_but_unix_socketpairs_work(tree: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        result = _run(
            """
            def connect():
                # A numeric address: no getaddrinfo, whose NSS modules Landlock would hide.
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
                    client.connect(("127.0.0.1", ARGS["port"]))

            def bind():
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
                    server.bind(("127.0.0.1", 0))

            def pair():
                left, right = socket.socketpair(socket.AF_UNIX)
                with left, right:
                    left.sendall(b"ping")
                    assert right.recv(4) == b"ping"

            before = attempt(connect)
            report = apply_landlock([PathGrant(ARGS["ro"])])
            done({
                "before": before,
                "tcp_enforced": report.tcp,
                "connect": attempt(connect),
                "bind": attempt(bind),
                "socketpair": attempt(pair),
            })
            """,
            port=port,
            **tree,
        )
    assert result == {
        "before": "ok",
        "tcp_enforced": True,
        "connect": "EACCES",
        "bind": "EACCES",
        "socketpair": "ok",
    }


def test_signals_and_abstract_sockets_are_scoped_to_the_domain(tree: dict[str, str]) -> None:
    name = f"caplet-test-{uuid.uuid4().hex}"
    scoped = landlock_abi() >= 6
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen(4)
        result = _run(
            """
            def connect_abstract():
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                    client.connect("\\0" + ARGS["name"])

            before = attempt(lambda: os.kill(ARGS["host_pid"], 0))
            report = apply_landlock([PathGrant(ARGS["ro"])])
            done({
                "before": before,
                "scoped": report.scoped,
                "kill_host": attempt(lambda: os.kill(ARGS["host_pid"], 0)),
                "kill_self": attempt(lambda: os.kill(os.getpid(), 0)),
                "abstract": attempt(connect_abstract),
            })
            """,
            host_pid=os.getpid(),
            name=name,
            **tree,
        )
    assert result["before"] == "ok"
    assert result["kill_self"] == "ok"
    assert result["scoped"] is scoped
    # Without ABI 6 the kernel cannot scope: then the report must say so and both succeed.
    assert result["kill_host"] == ("EPERM" if scoped else "ok")
    assert result["abstract"] == ("EPERM" if scoped else "ok")


def test_the_report_says_what_was_enforced(tree: dict[str, str]) -> None:
    abi = landlock_abi()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        result = _run(
            """
            def connect():
                # A numeric address: no getaddrinfo, whose NSS modules Landlock would hide.
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
                    client.connect(("127.0.0.1", ARGS["port"]))

            report = apply_landlock([PathGrant(ARGS["ro"])], abi=ARGS["abi"])
            done({
                "report": [report.abi, report.fs, report.tcp, report.scoped],
                "connect": attempt(connect),
                "secret": attempt(lambda: read(ARGS["outside"] + "/secret.txt")),
            })
            """,
            port=listener.getsockname()[1],
            abi=3,
            **tree,
        )
        newest = _run(
            """
            report = apply_landlock([PathGrant(ARGS["ro"])], abi=ARGS["abi"])
            done({"report": [report.abi, report.fs, report.tcp, report.scoped]})
            """,
            abi=abi + 10,
            **tree,
        )
    # ABI 3 has no network rights: the file rules hold, TCP stays open, and the report says so.
    assert result == {"report": [3, True, False, False], "connect": "ok", "secret": "EACCES"}
    # A request above the kernel's ABI is lowered to what the kernel has.
    assert newest == {"report": [abi, True, abi >= 4, abi >= 6]}


def test_a_missing_grant_raises_and_leaves_the_process_untouched(
    tree: dict[str, str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-dir")
    result = _run(
        """
        try:
            apply_landlock([PathGrant(ARGS["ro"]), PathGrant(ARGS["missing"], writable=True)])
        except SandboxError as exc:
            error = str(exc)
        else:
            error = None
        with open("/proc/self/status", encoding="ascii") as status:
            nnp = [line.split()[1] for line in status if line.startswith("NoNewPrivs:")]
        done({
            "error": error,
            "no_new_privs": nnp,
            "secret": attempt(lambda: read(ARGS["outside"] + "/secret.txt")),
        })
        """,
        missing=missing,
        **tree,
    )
    assert result["error"] is not None
    assert missing in str(result["error"])
    assert "does not exist" in str(result["error"])
    # Nothing irreversible happened before the bad grant was found.
    assert result["no_new_privs"] == ["0"]
    assert result["secret"] == "ok"


def test_relative_grants_and_abi_zero_are_refused(tree: dict[str, str]) -> None:
    result = _run(
        """
        errors = {}
        for name, call in {
            "relative": lambda: apply_landlock([PathGrant("relative/dir")]),
            "abi0": lambda: apply_landlock([PathGrant(ARGS["ro"])], abi=0),
        }.items():
            try:
                call()
            except SandboxError as exc:
                errors[name] = str(exc)
        errors["secret"] = attempt(lambda: read(ARGS["outside"] + "/secret.txt"))
        done(errors)
        """,
        **tree,
    )
    assert "'relative/dir'" in str(result["relative"])
    assert "absolute" in str(result["relative"])
    assert "Landlock is not available" in str(result["abi0"])
    assert "kernel >= 5.13" in str(result["abi0"])
    assert result["secret"] == "ok"


def test_every_descriptor_it_opened_is_closed(tree: dict[str, str]) -> None:
    result = _run(
        """
        def lowest_free():
            read_end, write_end = os.pipe()
            os.close(read_end)
            os.close(write_end)
            return [read_end, write_end]

        before = lowest_free()
        apply_landlock([PathGrant(ARGS["ro"]), PathGrant(ARGS["rw"], writable=True)])
        done({"before": before, "after": lowest_free()})
        """,
        **tree,
    )
    assert result["before"] == result["after"]
