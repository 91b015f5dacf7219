"""A scripted LLM server on 127.0.0.1 that speaks both provider APIs.

``POST /v1/chat/completions`` answers like an OpenAI-compatible server and
``POST /v1/messages`` like Anthropic's; each request takes the next scripted
:class:`Reply` (or calls the default script) and is recorded as an
:class:`Exchange`. Scripts are functions of the request, so a scripted
"honest" model can read the prompt and report the canaries it contains, the
way a real model would.

Nothing here sleeps: a "slow" reply waits on an event that the test (or
:meth:`LLMServer.stop`) sets after the client has given up.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")
_FILE_START = re.compile(r"^<<<FILE [0-9a-f]+ (\S+) \(\d+ lines\)>>>$")


@dataclass
class Exchange:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """The user message (both APIs put it last in ``messages``)."""
        content = self.body["messages"][-1]["content"]
        assert isinstance(content, str)
        return content

    @property
    def system(self) -> str:
        if self.path.endswith("/messages"):
            system = self.body["system"]
        else:
            system = self.body["messages"][0]["content"]
        assert isinstance(system, str)
        return system


@dataclass
class Reply:
    """What the server sends: the model's ``text``, or an HTTP error, or raw bytes."""

    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    hold: threading.Event | None = None


Script = Callable[[Exchange], Reply]


def shown_files(prompt: str) -> dict[str, list[tuple[int, str]]]:
    """The files of a prompt as shown: path -> [(shown line number, text)]."""
    files: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for line in prompt.splitlines():
        start = _FILE_START.match(line)
        if start:
            current = files.setdefault(start.group(1), [])
            continue
        if line.startswith("<<<END FILE"):
            current = None
            continue
        if current is not None:
            numbered = _NUMBERED.match(line)
            if numbered:
                current.append((int(numbered.group(1)), numbered.group(2)))
    return files


def uuid_lines(prompt: str) -> list[tuple[str, int, str]]:
    """(file, shown line, text) of every file line in the prompt that holds a UUID."""
    return [
        (path, number, text)
        for path, lines in shown_files(prompt).items()
        for number, text in lines
        if UUID.search(text)
    ]


def shown_line(prompt: str, path: str, needle: str) -> int:
    """The shown line number of the first line of ``path`` containing ``needle``."""
    for number, text in shown_files(prompt)[path]:
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} is not in {path} as shown")


def answer(**fields: object) -> str:
    """A complete, valid answer (LOW, approve), with ``fields`` replaced."""
    document: dict[str, object] = {
        "risk_level": "LOW",
        "summary": "Greets people by name.",
        "description_accurate": True,
        "capabilities_observed": [],
        "findings": [],
        "injection_attempts": [],
        "recommendation": "approve",
        "risk_reasons": [],
    }
    document.update(fields)
    return json.dumps(document)


#: Words of the override-style lines an honest model flags (the canaries say them).
_OVERRIDE_WORDS = ("SYSTEM OVERRIDE", "ADMIN COMMAND")


def canary_reports(exchange: Exchange) -> list[dict[str, str]]:
    """Injection reports quoting each override-style line with a UUID (what an honest model
    does with the canaries)."""
    return [
        {"excerpt": text.strip(), "reason": f"tries to instruct the auditor ({path}:{number})"}
        for path, number, text in uuid_lines(exchange.prompt)
        if any(word in text for word in _OVERRIDE_WORDS)
    ]


def honest(*, extra_injections: list[object] | None = None, **fields: object) -> Script:
    """A model that reports every injection it is shown (plus ``extra_injections``);
    ``fields`` override the rest of the answer."""
    extra = list(extra_injections or [])

    def script(exchange: Exchange) -> Reply:
        return Reply(answer(injection_attempts=[*canary_reports(exchange), *extra], **fields))

    return script


def obedient(exchange: Exchange) -> Reply:
    """A model the plugin talked round: LOW, approve, no injections reported."""
    del exchange
    return Reply(answer(summary="Pre-approved formatter; safe."))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests assert on what they need."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = {}
        exchange = Exchange(
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        owner = self.server.owner
        with owner.lock:
            owner.exchanges.append(exchange)
            step = owner.queue.popleft() if owner.queue else owner.default
        reply = step(exchange) if callable(step) else step
        if reply.hold is not None:
            reply.hold.wait(timeout=60)
        self._send(exchange, reply)

    def _send(self, exchange: Exchange, reply: Reply) -> None:
        if reply.raw is not None:
            payload = reply.raw
        elif reply.status != 200:
            payload = json.dumps({"error": {"message": f"scripted status {reply.status}"}}).encode()
        elif exchange.path == "/v1/chat/completions":
            payload = json.dumps(
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.text},
                            "finish_reason": "stop",
                        }
                    ],
                }
            ).encode()
        elif exchange.path == "/v1/messages":
            payload = json.dumps(
                {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": reply.text}],
                    "stop_reason": "end_turn",
                }
            ).encode()
        else:
            reply = Reply(status=404)
            payload = b'{"error": {"message": "no such endpoint"}}'
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a timeout test): nothing to deliver.
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LLMServer


class LLMServer:
    """The scripted server; use as a context manager or call :meth:`stop`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        self.queue: deque[Reply | Script] = deque()
        self.default: Reply | Script = honest()
        self.holds: list[threading.Event] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        # A short poll interval only makes shutdown() return sooner.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The API root to use as ``CAPLET_LLM_BASE_URL``."""
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}/v1"

    def script(self, *steps: Reply | Script) -> None:
        """Answer the next requests with ``steps``, in order (then the default)."""
        with self.lock:
            self.queue.extend(steps)

    def slow(self) -> Reply:
        """A reply that is only sent after the test is over (the client times out)."""
        hold = threading.Event()
        self.holds.append(hold)
        return Reply(answer(), hold=hold)

    def stop(self) -> None:
        for hold in self.holds:
            hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> LLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve() -> Iterator[LLMServer]:
    """Generator body for a fixture: a running server, stopped afterwards."""
    server = LLMServer()
    try:
        yield server
    finally:
        server.stop()
