"""Requests in flight on ``caplet mcp``: a client that never reads its answers.

Each test starts the real server (``python -m caplet mcp``) as a subprocess on
a real plugin and speaks raw JSON-RPC lines to its stdin, so the test decides
exactly what is written and what is read. Nothing waits on a clock: the test
waits for an event (a line on the server's stderr, the writer thread done, an
answer), with ``select`` on the pipes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests._mcp.mcpkit import INITIALIZE, mcp_command
from tests.conftest import PluginFactory

SOURCE = """
import time

def create_functions(config):
    def echo(text):
        return text

    def sleep(seconds):
        time.sleep(seconds)
        return "slept"

    return {"notes": {"echo": echo, "sleep": sleep}}
"""
MANIFEST = """
name = "notes"
version = "1.0.0"
description = "Notes for tests."

[modules.notes]
functions = ["echo", "sleep"]

[limits]
timeout_ms = 120000
"""
#: ``Policy.mcp.max_in_flight``'s default, which the attack runs against.
DEFAULT_BOUND = 32
PAUSED = "caplet mcp: reading paused"


@pytest.fixture
def workspace(tmp_path: Path, make_plugin: PluginFactory) -> Path:
    make_plugin("notes", manifest=MANIFEST, source=SOURCE)
    return tmp_path


_ENV = {"NO_COLOR": "1", "CAPLET_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _frame(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _call(request_id: int, name: str, *args: Any) -> bytes:
    return _frame(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": {"args": list(args)}},
        }
    )


@dataclass
class Raw:
    """A server subprocess spoken to in raw lines; stderr is read as it comes."""

    process: subprocess.Popen[bytes]
    stderr: str = ""
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def err_fd(self) -> int:
        assert self.process.stderr is not None
        return self.process.stderr.fileno()

    def read_err(self) -> bool:
        """Read what stderr has now (one read); False at its end."""
        chunk = os.read(self.err_fd(), 65536)
        self.stderr += chunk.decode(errors="replace")
        return bool(chunk)

    def answer(self, request_id: int) -> dict[str, Any]:
        """Read stdout until the answer to ``request_id`` (others are kept)."""
        while request_id not in self.answers:
            line = self.stdout.readline()
            assert line, f"the server ended before answering {request_id}: {self.stderr}"
            message = json.loads(line)
            if "id" in message:
                self.answers[message["id"]] = message
        return self.answers[request_id]


@contextmanager
def _raw(workspace: Path, *extra: str) -> Iterator[Raw]:
    process = subprocess.Popen(
        mcp_command(workspace, *extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env={**os.environ, **_ENV},
    )
    raw = Raw(process)
    try:
        raw.stdin.write(_frame(INITIALIZE))
        raw.stdin.flush()
        assert raw.answer(0)["result"]["serverInfo"]["name"] == "caplet"
        raw.stdin.write(_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        raw.stdin.flush()
        yield raw
    finally:
        if not raw.stdin.closed:
            raw.stdin.close()
        raw.stdout.read()  # the answers nobody read, so the server can end
        while raw.read_err():
            pass
        process.wait(timeout=60)
        raw.stdout.close()
        assert process.stderr is not None
        process.stderr.close()


def test_a_client_that_never_reads_stops_being_read_at_the_bound(workspace: Path) -> None:
    # attack14 (open until this branch): a client that wrote requests and never read the
    # answers made the server keep them all: the SDK starts a task per request line it
    # reads and the stdin reader never waits, so 2,000 calls with 60 KB arguments took
    # the server from 87 MB to 473 MB. Here 200 calls of 60 KB each, none of whose
    # answers (each over a pipe's 64 KiB) is read: on main the server read all 200
    # (the writer got every byte into a 64 KiB pipe while answers went unread); now it
    # reads until Policy.mcp.max_in_flight are unanswered, says so, and reads no more,
    # so the client's own pipe fills instead of the server's memory.
    count = 200
    padding = "p" * 60_000
    with _raw(workspace) as raw:
        done_r, done_w = os.pipe()

        def write_all() -> None:
            try:
                for request_id in range(1, count + 1):
                    raw.stdin.write(_call(request_id, "notes_echo", f"{request_id}:{padding}"))
                raw.stdin.flush()
            finally:
                os.write(done_w, b"x")

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        try:
            # Whichever comes first: every request written (the server read them all,
            # no answer read), or the server's word that it stopped reading.
            wrote_all = False
            while PAUSED not in raw.stderr:
                ready, _, _ = select.select([done_r, raw.err_fd()], [], [])
                if done_r in ready:
                    wrote_all = True
                    break
                assert raw.read_err(), f"the server ended: {raw.stderr}"
            assert not wrote_all, (
                f"the server read all {count} requests (12 MB) while none of their answers "
                "was read: nothing bounds what it holds for a client that never reads"
            )
            notice = next(line for line in raw.stderr.splitlines() if PAUSED in line)
            assert f"{DEFAULT_BOUND} requests unanswered" in notice, notice
            assert "Policy.mcp.max_in_flight" in notice, notice
            # The near miss: nothing was lost. Reading the answers now lets the server
            # read the rest; every request is answered, in full.
            for request_id in range(1, count + 1):
                result = raw.answer(request_id)["result"]
                assert result["content"][0]["text"] == f"{request_id}:{padding}"
            writer.join()
        finally:
            os.close(done_r)
            os.close(done_w)
    assert raw.process.returncode == 0
    assert "Traceback" not in raw.stderr
    assert raw.stderr.count(PAUSED) == 1, "said once per session, not per pause"


def test_a_cancelled_request_is_not_answered_and_frees_its_place(workspace: Path) -> None:
    # The near miss: notifications/cancelled still cancels (the worker sleeping for a
    # minute is stopped), and a request cancelled, never answered, gives its place back:
    # with a bound of 2, two cancelled requests that kept theirs would leave the server
    # reading nothing; the stats resource counts what is in flight.
    with _raw(workspace, "--set", "mcp.max_in_flight=2") as raw:
        for request_id in (1, 2):
            raw.stdin.write(_call(request_id, "notes_sleep", 60))
            raw.stdin.write(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": "changed my mind"},
                    }
                )
            )
        raw.stdin.write(_call(3, "notes_echo", "after"))
        raw.stdin.flush()
        # Read before asking for the stats, so that only the stats request is in flight:
        # the cancelled ones settled before the echo could run (it waited for their
        # worker to be stopped).
        assert raw.answer(3)["result"]["content"][0]["text"] == "after"
        raw.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "resources/read",
                    "params": {"uri": "caplet://stats"},
                }
            )
        )
        raw.stdin.flush()
        stats = json.loads(raw.answer(4)["result"]["contents"][0]["text"])
        assert stats["mcp"] == {"in_flight": 1, "max_in_flight": 2}, stats["mcp"]
        (plugin,) = stats["plugins"]
        # Each cancelled call that had reached the plugin counts as cancelled, never as a
        # timeout or a crash; one cancelled while it still waited for the plugin's one
        # worker (or before the SDK dispatched it) never became a call, so how many of the
        # two reached it is the scheduler's (a fresh-clone CI run saw 1).
        assert set(plugin["failures"]) <= {"cancelled"}, plugin["failures"]
        assert plugin["failures"].get("cancelled", 0) <= 2, plugin["failures"]
        raw.stdin.close()
        raw.stdout.read()
    assert set(raw.answers) == {0, 3, 4}, "a cancelled request is never answered"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_client_that_reads_gets_every_answer_past_the_bound(workspace: Path) -> None:
    # The near miss: the SDK's own client (which reads as it writes) sends three times
    # the bound at once; every call completes, none is refused or lost.
    params = StdioServerParameters(
        command=sys.executable,
        args=mcp_command(workspace, "--set", "mcp.max_in_flight=4")[1:],
        env=_ENV,
        cwd=str(workspace),
    )
    got: dict[int, str] = {}
    async with Client(params, read_timeout_seconds=120, mode="legacy") as client:

        async def one(index: int) -> None:
            result = await client.call_tool("notes_echo", {"args": [f"call {index}"]})
            assert not result.is_error
            got[index] = "\n".join(block.text for block in result.content)  # type: ignore[union-attr]

        async with anyio.create_task_group() as group:
            for index in range(12):
                group.start_soon(one, index)
    assert got == {index: f"call {index}" for index in range(12)}


def _sse_answer(body: str) -> dict[str, Any]:
    """The JSON-RPC answer in a streamable-HTTP response (SSE ``data:`` or plain JSON)."""
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message: dict[str, Any] = json.loads(line[5:])
            if "id" in message:
                return message
    answer: dict[str, Any] = json.loads(body)
    return answer


class _Http:
    """A raw streamable-HTTP client of one ``caplet mcp --http`` server."""

    def __init__(self, http: Any, url: str) -> None:
        self.http = http
        self.url = url

    async def session(self) -> dict[str, str]:
        """A new session (``initialize`` and ``initialized``): its headers."""
        opened = await self.http.post(
            self.url,
            json=INITIALIZE,
        )
        assert opened.status_code == 200, opened.text
        ids = {
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-11-25",
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.http.post(self.url, json=note, headers=ids)).status_code == 202
        return ids

    async def ask(self, ids: dict[str, str], request_id: int, **call: Any) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": request_id, **call}
        answer = await self.http.post(self.url, json=message, headers=ids)
        return _sse_answer(answer.text)

    async def stats(self, ids: dict[str, str], request_id: int) -> dict[str, Any]:
        """The session's ``caplet://stats`` (it needs no plugin call), or its error."""
        answer = await self.ask(
            ids, request_id, method="resources/read", params={"uri": "caplet://stats"}
        )
        if "error" in answer:
            return answer
        document: dict[str, Any] = json.loads(answer["result"]["contents"][0]["text"])
        return document

    async def cancel(self, ids: dict[str, str], request_id: int) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "enough"},
        }
        assert (await self.http.post(self.url, json=note, headers=ids)).status_code == 202


@asynccontextmanager
async def _http_server(workspace: Path, *settings: str) -> AsyncIterator[_Http]:
    """``caplet mcp --http 0`` with ``--set`` of each of ``settings``, and a client of it."""
    import httpx2

    sets = [arg for setting in settings for arg in ("--set", setting)]
    process = subprocess.Popen(
        mcp_command(workspace, "--http", "0", *sets),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env={**os.environ, **_ENV},
    )
    assert process.stderr is not None
    try:
        url = ""
        while not url:
            line = process.stderr.readline().decode()
            assert line, "the server ended before serving"
            if "serving http://" in line:
                url = line.split("serving ", 1)[1].split(" ", 1)[0]
        token = (workspace / "state" / "mcp-token").read_text().strip()
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            yield _Http(http, url)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


_SLEEP = {"name": "notes_sleep", "arguments": {"args": [60]}}
#: What a request refused by the bound of all sessions is told, after the count.
_ALL_SESSIONS = "requests of all sessions are in flight"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_over_http_a_sessions_request_past_the_bound_is_refused(workspace: Path) -> None:
    # HTTP requests are separate requests, and one whose client hung up keeps running,
    # so holding them back would keep them in the server all the same: past the bound of
    # its session a request is refused at once; another session is not affected.
    async with _http_server(workspace, "mcp.max_in_flight=2") as server:
        first = await server.session()
        sent, answers = anyio.create_memory_object_stream[dict[str, Any]](3)
        async with sent, answers, anyio.create_task_group() as group:

            async def held(request_id: int) -> None:
                await sent.send(
                    await server.ask(first, request_id, method="tools/call", params=_SLEEP)
                )

            # Three calls of a minute at once on a bound of 2: whichever comes third
            # is refused at once (the other two hold their places until cancelled).
            for request_id in (1, 2, 3):
                group.start_soon(held, request_id)
            answer = await answers.receive()
            assert answer["error"]["code"] == -32000
            message = answer["error"]["message"]
            assert "2 requests of this session are in flight" in message, message
            assert "Policy.mcp.max_in_flight = 2" in message, message
            refused = answer["id"]
            # The near miss: another session has its own bound (the plugin's one
            # worker is busy sleeping, so it asks for what needs no plugin call).
            other = await server.session()
            seen = await server.stats(other, 1)
            assert seen["mcp"] == {
                "in_flight": 1,
                "max_in_flight": 2,
                "in_flight_total": 3,
                "max_in_flight_total": 256,
            }
            # Cancelled, the sleeps give their places back.
            for cancelled in {1, 2, 3} - {refused}:
                await server.cancel(first, cancelled)
            request_id = 10
            while "error" in (seen := await server.stats(first, request_id)):
                request_id += 1  # until the cancelled calls have ended
            assert seen["mcp"]["in_flight"] == 1
            for _ in range(2):  # the cancelled calls' POSTs end (a 2025-era stream is
                assert "error" in await answers.receive()  # ended by an error)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_over_http_requests_past_the_bound_of_all_sessions_are_refused(
    workspace: Path,
) -> None:
    # The attack: each session has its own bound, and a client opens as many sessions
    # as it likes (one initialize each), so sessions x bound requests ran at once.
    async with _http_server(
        workspace, "mcp.max_in_flight=2", "mcp.max_in_flight_total=2"
    ) as server:
        first, second = await server.session(), await server.session()
        # The near miss: under the bound of all sessions, another session is answered.
        assert (await server.stats(second, 1))["mcp"] == {
            "in_flight": 1,
            "max_in_flight": 2,
            "in_flight_total": 1,
            "max_in_flight_total": 2,
        }
        sent, answers = anyio.create_memory_object_stream[dict[str, Any]](2)
        async with sent, answers, anyio.create_task_group() as group:

            async def held(request_id: int) -> None:
                while True:
                    answer = await server.ask(first, request_id, method="tools/call", params=_SLEEP)
                    # A sleep that reached the server while a stats request below held the
                    # other place was refused by the same bound: sent again until it holds one.
                    if _ALL_SESSIONS not in answer.get("error", {}).get("message", ""):
                        break
                await sent.send(answer)

            group.start_soon(held, 1)
            group.start_soon(held, 2)
            # Two sleeps of the first session fill the bound of all sessions, though the
            # second session has nothing in flight of its own bound: its request is refused.
            request_id = 2
            while "error" not in (seen := await server.stats(second, request_id)):
                request_id += 1  # until both sleeps are in flight
            assert seen["error"]["code"] == -32000
            message = seen["error"]["message"]
            assert f"2 {_ALL_SESSIONS}" in message, message
            assert "Policy.mcp.max_in_flight_total = 2" in message, message
            for cancelled in (1, 2):
                await server.cancel(first, cancelled)
            for _ in range(2):  # the cancelled calls' POSTs end with an error
                assert "error" in await answers.receive()
        # every place given back (once the cancelled calls have ended)
        request_id = 100
        while "error" in (seen := await server.stats(second, request_id)):
            request_id += 1
        assert seen["mcp"]["in_flight_total"] == 1
