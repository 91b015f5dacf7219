"""No host IPC through files (issue 13, point 3, the seccomp part): a plugin with a read
grant on a directory holding a host's pathname sockets and a FIFO, and knowing the name
of a host's abstract socket, reaches none of them; its own sockets keep working.

The host side listens for real (a stream and a datagram socket on pathnames in
the grant, an abstract stream socket, a FIFO with a reader) and must receive
nothing, whatever the plugin tries: a raw ``socket()``/``connect()``,
``multiprocessing.connection.Client``, ``logging.handlers.SysLogHandler``, a
datagram socketpair's ``sendto``/``sendmsg`` to the path, ``sendto`` with an
address on a stream pair, writing into the FIFO.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._identity import worker_identity
from tests._sandbox.seccompkit import call, sandboxed_host, seccomp_log, write_plugin

SOURCE = """
import asyncio, logging, logging.handlers, multiprocessing.connection


def reach(stream_path, dgram_path, abstract):
    out = {}

    def raw_connect(address, kind=socket.SOCK_STREAM):
        with socket.socket(socket.AF_UNIX, kind) as sock:
            sock.connect(address)
            sock.sendall(b"raw")

    out["raw stream"] = attempt(raw_connect, stream_path)
    out["raw dgram"] = attempt(raw_connect, dgram_path, socket.SOCK_DGRAM)
    out["raw abstract"] = attempt(raw_connect, b"\\0" + abstract.encode())
    out["multiprocessing"] = attempt(
        lambda: multiprocessing.connection.Client(stream_path).send("mp")
    )
    out["multiprocessing abstract"] = attempt(
        lambda: multiprocessing.connection.Client("\\0" + abstract).send("mp")
    )

    def syslog():
        handler = logging.handlers.SysLogHandler(address=dgram_path)
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "syslog", (), None)
        handler.emit(record)  # handleError swallows the failure, as in a real logger
        handler.close()
        if getattr(handler, "socket", None) is None:
            raise PermissionError(errno.EPERM, "no socket")

    out["syslog"] = attempt(syslog)

    def dgram_pair():
        left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        with left, right:
            left.sendto(b"dgram", dgram_path)

    out["dgram socketpair"] = attempt(dgram_pair)

    def stream_pair_sendto(kind):
        left, right = socket.socketpair(socket.AF_UNIX, kind)
        with left, right:
            left.sendto(b"sendto", dgram_path)

    out["stream pair sendto"] = attempt(stream_pair_sendto, socket.SOCK_STREAM)
    out["seqpacket pair sendto"] = attempt(stream_pair_sendto, socket.SOCK_SEQPACKET)

    def seqpacket_sendmsg():
        # The kernel ignores the address on a connected seqpacket socket:
        # the datagram goes to the peer, never to the path.
        left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with left, right:
            left.sendmsg([b"sendmsg"], [], 0, dgram_path)
            assert right.recv(16) == b"sendmsg"

    out["seqpacket pair sendmsg"] = attempt(seqpacket_sendmsg)

    return out


def write_fifo(fifo_path):
    def fifo():
        fd = os.open(fifo_path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"fifo")
        finally:
            os.close(fd)

    return attempt(fifo)


def own_sockets():
    # The channel to the host is fd 3; asyncio's loop needs its socketpair self-pipe.
    channel = socket.socket(fileno=os.dup(3))
    kind = channel.type
    channel.close()

    async def one(i):
        await asyncio.sleep(0)
        return i * i

    async def main():
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        with left, right:
            left.setblocking(False)
            right.setblocking(False)
            await loop.sock_sendall(left, b"x")
            assert await loop.sock_recv(right, 1) == b"x"
        return await asyncio.gather(*(one(i) for i in range(5)))

    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    left.send(b"ping")
    pong = right.recv(8)
    left.close()
    right.close()
    return {"channel": int(kind), "gather": asyncio.run(main()), "seqpacket": pong.decode()}
"""
FUNCTIONS = ("reach", "write_fifo", "own_sockets")


@dataclass
class Listeners:
    """The host's services in the grant, all non-blocking so draining never waits."""

    stream: socket.socket
    dgram: socket.socket
    abstract: socket.socket
    abstract_name: str
    fifo_path: Path
    fifo_reader: int

    def received(self) -> list[str]:
        got = []
        for listener, name in ((self.stream, "stream"), (self.abstract, "abstract")):
            try:
                connection, _ = listener.accept()
            except BlockingIOError:
                continue
            got.append(f"{name}: a connection")
            connection.close()
        try:
            got.append(f"dgram: {self.dgram.recv(64)!r}")
        except BlockingIOError:
            pass
        try:
            data = os.read(self.fifo_reader, 64)
            if data:
                got.append(f"fifo: {data!r}")
        except BlockingIOError:
            pass
        return got


@pytest.fixture
def grant(tmp_path: Path) -> Iterator[tuple[Path, Listeners]]:
    path = tmp_path / "shared"
    path.mkdir()
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream.bind(str(path / "service.sock"))
    stream.listen()
    stream.setblocking(False)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(str(path / "log.sock"))
    dgram.setblocking(False)
    name = f"caplet-test-{secrets.token_hex(8)}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(b"\0" + name.encode())
    abstract.listen()
    abstract.setblocking(False)
    for sock in (stream, dgram):
        os.chmod(sock.getsockname(), 0o777)  # any uid may connect, were it let through
    fifo = path / "commands.fifo"
    os.mkfifo(fifo, 0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    listeners = Listeners(stream, dgram, abstract, name, fifo, reader)
    try:
        yield path, listeners
    finally:
        for sock in (stream, dgram, abstract):
            sock.close()
        os.close(reader)


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, grant: tuple[Path, Listeners]) -> Iterator[PluginHost]:
    path, _ = grant
    write_plugin(plugins_dir, "prober", SOURCE, FUNCTIONS, capabilities=(f"fs.read:{path}",))
    with sandboxed_host(plugins_dir, state_dir, "prober") as plugin_host:
        yield plugin_host


def test_the_listeners_work_for_the_host_itself(grant: tuple[Path, Listeners]) -> None:
    # The control: the same attempts from an unconfined process do arrive.
    path, listeners = grant
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(path / "service.sock"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
        client.sendto(b"hello", str(path / "log.sock"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(b"\0" + listeners.abstract_name.encode())
    writer = os.open(listeners.fifo_path, os.O_WRONLY | os.O_NONBLOCK)
    os.write(writer, b"x")
    os.close(writer)
    assert sorted(listeners.received()) == [
        "abstract: a connection",
        "dgram: b'hello'",
        "fifo: b'x'",
        "stream: a connection",
    ]


def test_no_host_socket_or_fifo_is_reached(host: PluginHost, grant: tuple[Path, Listeners]) -> None:
    path, listeners = grant
    out = call(
        host,
        "prober",
        "reach",
        str(path / "service.sock"),
        str(path / "log.sock"),
        listeners.abstract_name,
    )
    assert out == {
        "raw stream": "EPERM",  # socket() itself: no family may be created
        "raw dgram": "EPERM",
        "raw abstract": "EPERM",
        "multiprocessing": "EPERM",
        "multiprocessing abstract": "EPERM",
        "syslog": "EPERM",
        "dgram socketpair": "EPERM",  # a connected datagram pair could sendto any path
        "stream pair sendto": "EPERM",  # sendto with an address
        "seqpacket pair sendto": "EPERM",
        "seqpacket pair sendmsg": "ok",  # delivered to its own peer (asserted inside)
    }
    assert listeners.received() == []
    assert host.disable("prober")
    logged = seccomp_log(host, "prober")
    # AF_UNIX socket() is refused uncounted (glibc's nscd probe makes it routinely);
    # the datagram pair and the addressed sendto are counted.
    assert {"socketpair", "sendto"} <= set(logged), logged


def test_a_fifo_in_a_read_grant_cannot_be_written(
    host: PluginHost, grant: tuple[Path, Listeners]
) -> None:
    # Not seccomp's to stop (BPF cannot see that an open(2) names a FIFO):
    # Landlock refuses it, now that the jail's writable tmpfs moves aside
    # whenever a grant lies under /tmp (as this test's does).
    _, listeners = grant
    assert call(host, "prober", "write_fifo", str(listeners.fifo_path)) == "EACCES"
    assert listeners.received() == []


def test_the_workers_own_sockets_and_asyncio_keep_working(host: PluginHost) -> None:
    out = call(host, "prober", "own_sockets")
    assert out == {
        "channel": int(socket.SOCK_STREAM),
        "gather": [0, 1, 4, 9, 16],
        "seqpacket": "ping",
    }
    assert host.disable("prober")
    assert seccomp_log(host, "prober") == {}


HOARD_SOURCE = """
import array

KEEP = []


def hoard():
    # Descriptors in flight (sent with SCM_RIGHTS, never received) are
    # counted per uid in the kernel (user_struct.unix_inflight), and a sender
    # is refused once that count passes its own RLIMIT_NOFILE.
    left, right = socket.socketpair()
    KEEP.append((left, right))
    read_end, _ = os.pipe()
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [read_end] * 200))]
    sent = 0
    for _ in range(20):
        try:
            left.sendmsg([b"x"], rights)
        except OSError as exc:
            return {"sent": sent, "errno": errno.errorcode.get(exc.errno)}
        sent += 200
    return {"sent": sent}


def pass_one():
    left, right = socket.socketpair()
    read_end, _ = os.pipe()
    return attempt(
        left.sendmsg,
        [b"x"],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [read_end]))],
    )
"""


@pytest.mark.xfail(
    not worker_identity().own_real_uids,
    strict=True,
    reason="descriptors in flight are counted per real uid: an unprivileged host's workers all "
    "run as its user, so one plugin holding ~500 makes every other worker's SCM_RIGHTS fail "
    "(ETOOMANYREFS); a root host gives each worker a real uid of its own "
    "(caplet._sandbox._identity); docs/security.md, attack10",
)
def test_a_plugin_cannot_stop_another_from_passing_descriptors(
    plugins_dir: Path, state_dir: Path
) -> None:
    write_plugin(plugins_dir, "hoarder", HOARD_SOURCE, ("hoard", "pass_one"))
    write_plugin(plugins_dir, "bystander", HOARD_SOURCE, ("hoard", "pass_one"))
    with sandboxed_host(plugins_dir, state_dir, "hoarder", "bystander") as host:
        assert call(host, "bystander", "pass_one") == "ok"
        assert call(host, "hoarder", "hoard") == {"sent": 400, "errno": "ETOOMANYREFS"}
        assert call(host, "bystander", "pass_one") == "ok"
