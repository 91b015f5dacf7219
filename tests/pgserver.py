"""A real, throw-away PostgreSQL server for the tests and the store benchmark.

``initdb`` makes a cluster in a private temporary directory and ``pg_ctl``
runs it there, listening only on a unix socket in that directory (no TCP
port: nothing else on the machine can reach it, and two runs never collide
on a port). Local connections are trusted, which is safe for the same
reason: the socket's directory is the only way in.

PostgreSQL refuses to run as root (``initdb``: "cannot be run as root"), and
CI runs the suite as root: then the server runs as ``nobody`` through
``setpriv`` (util-linux), in a directory created for it outside pytest's
root-only temporary tree, and the tests still connect as the database
superuser ``caplet`` over the socket. Nothing is skipped when the binaries
are missing: :class:`PgServer` raises with the package to install
(``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

__all__ = ["PgServer", "pg_bin_dir", "running_server"]

#: The database superuser the cluster is made with (not the OS user).
SUPERUSER = "caplet"
#: The user the server runs as when the tests run as root.
UNPRIVILEGED = "nobody"


def pg_bin_dir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    found = shutil.which("pg_ctl")
    if found is not None and shutil.which("initdb") is not None:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    raise RuntimeError(
        "the PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH or in "
        "/usr/lib/postgresql/*/bin; install them (apt-get install postgresql) to run the "
        "fleet tests"
    )


class PgServer:
    """One PostgreSQL cluster in its own temporary directory, reachable by unix socket."""

    def __init__(self) -> None:
        self.bin = pg_bin_dir()
        self.as_root = os.geteuid() == 0
        # Outside pytest's temporary tree: that one is 0700 root's, and the
        # server's user must reach its own directory.
        self.root = Path(tempfile.mkdtemp(prefix="caplet-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.socket_dir.mkdir()
        if self.as_root:
            entry = pwd.getpwnam(UNPRIVILEGED)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)
        self.running = False

    # -- processes ------------------------------------------------------------------

    def _run(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a server binary as the server's user (``nobody`` when we are root)."""
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_root:
            command = [
                "setpriv",
                f"--reuid={UNPRIVILEGED}",
                f"--regid={pwd.getpwnam(UNPRIVILEGED).pw_gid}",
                "--clear-groups",
                "--",
                *command,
            ]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "HOME": str(self.root),
        }
        result = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=self.root, check=False
        )
        if check and result.returncode != 0:
            log = self.log.read_text(encoding="utf-8") if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({result.returncode}): {result.stderr.strip()}"
                f"\n{result.stdout.strip()}\n{log[-2000:]}"
            )
        return result

    def init(self) -> None:
        self._run(
            [
                "initdb",
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ]
        )

    def start(self) -> None:
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
            "-c max_connections=100 -c shared_buffers=32MB"
        )
        self._run(
            [
                "pg_ctl",
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                options,
            ]
        )
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean shutdown) or ``immediate`` (like a crash)."""
        self._run(["pg_ctl", "stop", "-w", "-t", "60", "-D", str(self.data), "-m", mode])
        self.running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        if self.running:
            self._run(
                ["pg_ctl", "stop", "-w", "-D", str(self.data), "-m", "immediate"], check=False
            )
            self.running = False
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases ------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL of *database* over this server's socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='/')}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run *sql* with psql as the superuser; its unaligned output."""
        result = subprocess.run(
            [
                str(self.bin / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                self.url(database),
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql {sql!r} failed: {result.stderr.strip()}")
        return result.stdout.strip()

    def new_database(self) -> str:
        """Create an empty database of its own; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)


@contextlib.contextmanager
def running_server() -> Iterator[PgServer]:
    """A fresh cluster, started; stopped and removed afterwards."""
    server = PgServer()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.close()
