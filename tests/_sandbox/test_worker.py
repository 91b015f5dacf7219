"""The worker process itself, driven frame by frame over a real socketpair.

The launcher tests cover the happy paths; these speak the protocol by hand so
a host that misbehaves (out of order, malformed, oversized) can be played.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from caplet._sandbox._frames import (
    FrameReader,
)
from caplet._sandbox._plugin_load import PLUGIN_PACKAGE
from caplet._sandbox._protocol import (
    Fatal,
    Ready,
    Result,
    WorkerMessage,
)
from caplet._sandbox._protocol_decode import (
    decode_worker_message,
)
from caplet._sandbox._protocol_encode import (
    encode_call,
    encode_init,
    encode_shutdown,
)
from caplet._sandbox._subprocess import worker_command
from caplet._sandbox._worker import (
    EXIT_LOAD_FAILED,
    EXIT_OK,
    EXIT_PROTOCOL,
    warm_up,
)

PLUGIN = """
def create_functions(config):
    return {"demo": {"run": lambda x=1: x * 2}}
"""


@dataclass
class RawWorker:
    process: subprocess.Popen[bytes]
    sock: socket.socket
    reader: FrameReader
    stderr: Path

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self) -> WorkerMessage | None:
        payload = self.reader.read_frame(time.monotonic() + 30)
        return None if payload is None else decode_worker_message(payload)

    def exit_code(self) -> int:
        return self.process.wait(timeout=30)

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8")


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawWorker]:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            worker_command(child.fileno()),
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            pass_fds=(child.fileno(),),
            cwd=tmp_path,
        )
    child.close()
    worker = RawWorker(process, host, FrameReader(host), stderr)
    try:
        yield worker
    finally:
        host.close()
        if process.poll() is None:
            process.kill()
        process.wait()


def _init(tmp_path: Path, *, entry: str = "plugin.py") -> bytes:
    return encode_init(
        0,
        plugin="demo",
        entry=entry,
        snapshot=str(tmp_path / "snapshot"),
        config={},
        modules={"demo": ("run",)},
    )


def test_serves_calls_then_exits_cleanly_on_shutdown(raw: RawWorker, tmp_path: Path) -> None:
    raw.send(_init(tmp_path))
    assert raw.receive() == Ready(0, {"demo": ("run",)}, ())
    raw.send(encode_call(1, "demo", "run", [21], {}) + encode_call(2, "demo", "run", [], {}))
    assert raw.receive() == Result(1, 42)
    assert raw.receive() == Result(2, 2)
    raw.send(encode_shutdown(3))
    assert raw.receive() is None
    assert raw.exit_code() == EXIT_OK


def test_end_of_stream_is_a_clean_exit(raw: RawWorker, tmp_path: Path) -> None:
    raw.send(_init(tmp_path))
    assert isinstance(raw.receive(), Ready)
    raw.sock.shutdown(socket.SHUT_WR)
    assert raw.exit_code() == EXIT_OK


def test_end_of_stream_before_init_is_a_clean_exit(raw: RawWorker) -> None:
    raw.sock.shutdown(socket.SHUT_WR)
    assert raw.exit_code() == EXIT_OK


def test_call_before_init_is_a_protocol_exit(raw: RawWorker) -> None:
    raw.send(encode_call(1, "demo", "run", [], {}))
    assert raw.exit_code() == EXIT_PROTOCOL
    assert "expected INIT as the first frame, got Call" in raw.log()


@pytest.mark.parametrize(
    ("frame", "logged"),
    [
        (struct.pack(">I", 2) + b"\xc1\xc1", "malformed msgpack"),
        (struct.pack(">I", 0xFFFFFFFF), "frame of 4294967295 bytes exceeds the limit"),
        (struct.pack(">I", 7) + bytes([0x96, 1, 1, 1, 1, 1, 1]), "CALL module must be a str"),
    ],
)
def test_malformed_frames_from_the_host_are_a_protocol_exit(
    raw: RawWorker, tmp_path: Path, frame: bytes, logged: str
) -> None:
    raw.send(_init(tmp_path))
    assert isinstance(raw.receive(), Ready)
    raw.send(frame)
    assert raw.exit_code() == EXIT_PROTOCOL
    assert "protocol error from the host" in raw.log()
    assert logged in raw.log()


def test_second_init_is_a_protocol_exit(raw: RawWorker, tmp_path: Path) -> None:
    raw.send(_init(tmp_path))
    assert isinstance(raw.receive(), Ready)
    raw.send(_init(tmp_path))
    assert raw.exit_code() == EXIT_PROTOCOL
    assert "a second INIT" in raw.log()


def test_bad_entry_is_fatal_and_exit_1(raw: RawWorker, tmp_path: Path) -> None:
    raw.send(_init(tmp_path, entry="../outside.py"))
    message = raw.receive()
    assert isinstance(message, Fatal)
    assert message.message == (
        "entry '../outside.py' must be a relative path to a .py file inside the plugin "
        "(for example 'plugin.py')"
    )
    assert raw.exit_code() == EXIT_LOAD_FAILED


def test_code_in_a_zip_archive_is_never_imported(raw: RawWorker, tmp_path: Path) -> None:
    # The attack: the scanner reads .py files; `import ctypes` inside a zip of
    # the plugin (any name: zipimport finds a zip by its trailing directory),
    # put on sys.path, passed the danger gate and ran.
    snapshot = tmp_path / "snapshot"
    with zipfile.ZipFile(snapshot / "notes.dat", "w") as archive:
        archive.writestr("hidden.py", "import ctypes\nVALUE = 'zip code ran'\n")
    (snapshot / "plugin.py").write_text(
        "import os, sys\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'notes.dat'))\n"
        "import hidden\n"
        "def create_functions(config):\n"
        "    return {'demo': {'run': lambda: hidden.VALUE}}\n",
        encoding="utf-8",
    )
    raw.send(_init(tmp_path))
    message = raw.receive()
    assert isinstance(message, Fatal), message
    assert "No module named 'hidden'" in message.message
    assert raw.exit_code() == EXIT_LOAD_FAILED


def test_missing_entry_file_is_fatal(raw: RawWorker, tmp_path: Path) -> None:
    raw.send(_init(tmp_path, entry="main.py"))
    message = raw.receive()
    assert isinstance(message, Fatal)
    assert message.message.startswith("entry file main.py not found in the plugin snapshot")
    assert raw.exit_code() == EXIT_LOAD_FAILED


@pytest.mark.parametrize("argv", [[], ["abc"], ["1"], ["5", "5"], ["5", "2"], ["5", "6", "7"]])
def test_bad_command_line_is_a_protocol_exit(tmp_path: Path, argv: list[str]) -> None:
    command = worker_command(0)[:-1] + argv
    done = subprocess.run(command, env={}, capture_output=True, cwd=tmp_path, check=False)
    assert done.returncode == EXIT_PROTOCOL
    assert b"usage: worker <channel fd (>= 3)>" in done.stderr


def test_a_descriptor_that_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    with target.open("rb") as handle:
        done = subprocess.run(
            worker_command(handle.fileno()),
            env={},
            capture_output=True,
            cwd=tmp_path,
            pass_fds=(handle.fileno(),),
            check=False,
        )
    assert done.returncode == EXIT_PROTOCOL
    assert b"is not a usable socket" in done.stderr


def test_warm_up_leaves_nothing_behind(tmp_path: Path) -> None:
    before = set(sys.modules)
    warm_up(str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert "_caplet_warm_up" not in sys.modules
    assert not any(name.startswith(PLUGIN_PACKAGE) for name in set(sys.modules) - before)


def test_warm_up_where_nothing_can_be_written_is_a_no_op(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    warm_up(str(missing))  # best effort: never raises
    assert not missing.exists()
