"""attack31: what held in a real worker (red-team host, static gate off).

The host's proxy, loader and interpreter variables never reach a worker, no socket
reaches a listener of the host's (an abstract unix socket, TCP or UDP on 127.0.0.1,
netlink, packet), and nothing above a granted folder is seen. Each probe returns its
errno; the host-side listeners record any connection.

The worker of a user's host *is* the user in its namespace, so it owns the granted
folder itself, and ``chmod`` of the folder a ``fs.write`` grant names (the mount's root)
opened it to every local user: 0700 made 0777. seccomp now refuses a changed mode that
others may write (as tarfile's ``data`` filter drops it); open (strict xfail as an
unprivileged host): 0700 made 0755, readable by others. A root host's workers run as
uids of their own and get EPERM for both.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import PluginFactory

#: Set in the host's environment before the worker starts; none may be seen in it.
HOST_ENV = {
    "HTTP_PROXY": "http://10.9.9.9:3128",
    "https_proxy": "http://10.9.9.9:3128",
    "ALL_PROXY": "socks5://10.9.9.9",
    "NO_PROXY": "*",
    "PYTHONPATH": "/tmp/attack31-evil",
    "PYTHONSTARTUP": "/tmp/attack31-evil.py",
    "LD_PRELOAD": "/tmp/attack31-evil.so",
    "BASH_ENV": "/tmp/attack31-evil.sh",
    "SSL_CERT_FILE": "/tmp/attack31-evil.pem",
    "ATTACK31_SECRET": "s3cr3t",
}

SOURCE = """
import errno
import os
import socket

DATA = {data!r}
PORT = {port}
MODE = {mode}


def create_functions(config):
    def run():
        out = {{}}

        def probe(name, action):
            try:
                action()
                out[name] = "done"
            except OSError as exc:
                out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

        def udp():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"x", ("127.0.0.1", PORT))

        probe("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0attack31"))
        probe("tcp", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))
        probe("udp", udp)
        probe("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
        probe("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
        probe("chmod", lambda: os.chmod(DATA, MODE))
        probe("parent", lambda: os.listdir(DATA + "/.."))
        out["env"] = sorted(os.environ)
        return out

    return {{"main": {{"run": run}}}}
"""


class Listeners:
    """An abstract unix socket and a TCP socket on 127.0.0.1, recording connections."""

    def __init__(self) -> None:
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind("\0attack31")
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.reached: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        for sock, name in ((self.unix, "abstract"), (self.tcp, "tcp")):
            sock.listen(4)
            sock.settimeout(0.2)
            thread = threading.Thread(target=self._accept, args=(sock, name), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _accept(self, sock: socket.socket, name: str) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.reached.append(name)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self.unix.close()
        self.tcp.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    opened = Listeners()
    yield opened
    opened.close()


def _probe(
    data: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    port: int,
    mode: int = 0o777,
) -> dict[str, object]:
    make_plugin(
        "probe",
        source=SOURCE.format(data=str(data), port=port, mode=oct(mode)),
        extra=f'capabilities = ["fs.write:{data}"]\n',
    )
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher, red_team=True) as host:
        assert host.enable("probe", consent=True)
        out: dict[str, object] = host.call("probe", "main.run")
    return out


@pytest.mark.security
def test_no_host_variable_socket_or_parent_of_a_grant_reaches_a_worker(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    listeners: Listeners,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in HOST_ENV.items():
        monkeypatch.setenv(name, value)
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)  # the worker's uid may write here (a root host's is not the owner)
    out = _probe(data, plugins_dir, state_dir, launcher, make_plugin, listeners.port)
    env = out["env"]
    assert isinstance(env, list)
    assert not set(HOST_ENV) & set(env), env
    for name in ("abstract", "tcp", "udp", "netlink", "packet"):
        assert out[name] == "EPERM", (name, out[name])
    assert listeners.reached == []
    assert out["parent"] == "EACCES"


_READS_OPEN = pytest.mark.xfail(
    os.geteuid() != 0,
    strict=True,
    reason="attack31 open: as an unprivileged host the worker owns the folder a fs.write "
    "grant names and chmod 0o755 of it (the mount's root) opens the user's 0700 folder to "
    "every local user's reads; seccomp refuses only a mode others may write (refusing read "
    "bits would refuse shutil.copy's and tarfile's honest modes), Landlock has no right for "
    "modes",
)


@pytest.mark.security
@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(0o777, id="to-writes"),  # seccomp: no write bit for others in a chmod
        pytest.param(0o755, id="to-reads", marks=_READS_OPEN),
    ],
)
def test_a_write_grant_cannot_open_the_granted_folder_to_other_users(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    listeners: Listeners,
    mode: int,
) -> None:
    data = _private_folder(tmp_path)
    before = data.stat().st_mode & 0o7777
    out = _probe(data, plugins_dir, state_dir, launcher, make_plugin, listeners.port, mode)
    assert (data.stat().st_mode & 0o7777) == before, out["chmod"]
    assert out["chmod"] == "EPERM"


@pytest.mark.security
def test_a_write_grant_may_still_change_modes_others_cannot_write(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    listeners: Listeners,
) -> None:
    """The near miss: ``chmod 0o700`` (and the group's bits) of the granted folder is the
    owner's as before; a root host's worker is not its owner (EPERM from the kernel)."""
    data = _private_folder(tmp_path)
    out = _probe(data, plugins_dir, state_dir, launcher, make_plugin, listeners.port, 0o770)
    if os.geteuid() == 0:
        assert out["chmod"] == "EPERM"
    else:
        assert out["chmod"] == "done"
        assert data.stat().st_mode & 0o7777 == 0o770


def _private_folder(tmp_path: Path) -> Path:
    data = tmp_path / "private"
    data.mkdir(mode=0o700)
    if os.geteuid() == 0:
        # A root host's worker has a uid of its own: let it write, as a shared folder
        # would (group and others), and see that it still cannot change the mode.
        data.chmod(0o703)
    return data
