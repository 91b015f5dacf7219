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

import ast
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from caplet._audit._canary_text import find_ids

_NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")
_FILE_START = re.compile(r"^<<<FILE [0-9a-f]+ #\d+ (\S+) \(\d+ lines\)>>>$")


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
    #: Send the headers of a huge body, then bytes as fast as the client reads
    #: them, until it hangs up (a server that never finishes its answer).
    endless: bool = False
    #: Send the headers, then one byte of the answer at a time, a few a second,
    #: until it hangs up: every read gets data, only a total deadline ends it.
    trickle: bool = False
    #: Why the model stopped: the token limit ("length" for OpenAI, "max_tokens" for
    #: Anthropic) instead of the end of its answer.
    cut: bool = False
    #: Copy the tokens of the prompt's first and last lines into the answer's
    #: ``prompt_start``/``prompt_end``, and those of its checkpoint lines into
    #: ``checkpoints``, where the text lacks them, as a model shown the whole prompt
    #: does (auditor24, auditor27); False sends the text as it is.
    echo: bool = True
    #: The prompt tokens the server says it read (``usage``); None reports no usage.
    prompt_tokens: int | None = None
    #: The model the answer says answered (its ``model`` field); None sends none.
    model: str | None = None


Script = Callable[[Exchange], Reply]


_BEGIN = re.compile(r"^BEGIN AUDIT (\S+)$", re.MULTILINE)
_END = re.compile(r"^END AUDIT (\S+)$", re.MULTILINE)
_CHECKPOINT = re.compile(r"^<<<CHECKPOINT [0-9a-f]+ ([0-9a-f]+)>>>$", re.MULTILINE)


def prompt_ends(prompt: str) -> tuple[str, str]:
    """The tokens of the prompt's first and last lines ("" for a line it lacks)."""
    begin = _BEGIN.search(prompt)
    ends = _END.findall(prompt)
    return (begin.group(1) if begin else "", ends[-1] if ends else "")


def prompt_checkpoints(prompt: str) -> list[str]:
    """The tokens of the prompt's checkpoint lines, in order (auditor27)."""
    return _CHECKPOINT.findall(prompt)


def with_echo(text: str, prompt: str) -> str:
    """``text`` with ``prompt_start``/``prompt_end`` and ``checkpoints`` added to its first
    object where it lacks them (what :attr:`Reply.echo` sends)."""
    start, end = prompt_ends(prompt)
    echoes: tuple[tuple[str, object], ...] = (
        ("prompt_start", start),
        ("prompt_end", end),
        ("checkpoints", prompt_checkpoints(prompt)),
    )
    add = {key: token for key, token in echoes if f'"{key}"' not in text}
    brace = text.find("{")
    if not add or brace < 0:
        return text
    rest = text[brace + 1 :]
    joint = "" if rest.lstrip().startswith("}") else ", "
    return f"{text[: brace + 1]}{json.dumps(add)[1:-1]}{joint}{rest}"


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


#: Words every injection aimed at an auditor uses one of (caplet's canaries do:
#: each has an instruction about findings, risk, approval ...). An identifier
#: without them (a constant of the plugin) is not an injection.
_INSTRUCTING = (
    "review",
    "audit",
    "risk",
    "approv",
    "finding",
    "scanner",
    "safe",
    "instruction",
    "analysis",
    "capabilit",
    "description",
    "recommend",
    "network",
)


@dataclass(frozen=True)
class Block:
    """One passage of a shown file that holds an identifier and instructs the auditor."""

    path: str
    first: int
    last: int
    text: str
    ids: frozenset[str]


def _statement_lines(source: str, line: int) -> tuple[int, int]:
    """The lines of the smallest statement holding ``line`` (the line itself if none parses)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return line, line
    best = (line, line)
    width = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        span = node.end_lineno - node.lineno
        if node.lineno <= line <= node.end_lineno and (width is None or span < width):
            width, best = span, (node.lineno, node.end_lineno)
    return best


def canary_blocks(prompt: str) -> list[Block]:
    """Every passage an honest model would report: comments, docstrings and string
    constants of the shown files that hold an identifier and talk to an auditor.

    A comment is the run of comment lines around the identifier's line; a
    string is the whole statement it belongs to (found with :mod:`ast`).
    """
    found: list[Block] = []
    for path, lines in shown_files(prompt).items():
        by_number = dict(lines)
        source = "\n".join(text for _, text in lines) + "\n"
        seen: set[int] = set()
        for number, text in lines:
            if number in seen or not find_ids(text):
                continue
            if text.lstrip().startswith("#"):
                first = last = number
                while first - 1 in by_number and by_number[first - 1].lstrip().startswith("#"):
                    first -= 1
                while last + 1 in by_number and by_number[last + 1].lstrip().startswith("#"):
                    last += 1
            else:
                first, last = _statement_lines(source, number)
            passage = "\n".join(by_number[n].strip() for n in range(first, last + 1))
            seen.update(range(first, last + 1))
            if any(word in passage.lower() for word in _INSTRUCTING):
                found.append(Block(path, first, last, passage, frozenset(find_ids(passage))))
    return found


def canary_ids(prompt: str) -> set[str]:
    """The identifiers of the passages :func:`canary_blocks` finds (lower-cased)."""
    return {i for block in canary_blocks(prompt) for i in block.ids}


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


def canary_reports(exchange: Exchange) -> list[dict[str, str]]:
    """Injection reports quoting each passage that addresses the auditor, whole (what an
    honest model does with the canaries)."""
    return [
        {
            "excerpt": block.text,
            "reason": f"tries to instruct the auditor ({block.path}:{block.first})",
        }
        for block in canary_blocks(exchange.prompt)
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
        if reply.endless:
            self._send_endless(owner.stopping)
            return
        if reply.trickle:
            self._send_trickle(owner.stopping)
            return
        self._send(exchange, reply)

    def _send_endless(self, stopping: threading.Event) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(10**12))
            self.end_headers()
            self.wfile.write(b'{"choices": [{"message": {"content": "')
            while not stopping.is_set():
                self.wfile.write(b" " * 4096)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what the test wants

    def _send_trickle(self, stopping: threading.Event) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(10**6))
            self.end_headers()
            self.wfile.write(b'{"choices": [{"message": {"content": "')
            self.wfile.flush()
            # The server's pace, not the test's clock: the wait ends at once on stop.
            while not stopping.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what the test wants

    def _send(self, exchange: Exchange, reply: Reply) -> None:
        text = with_echo(reply.text, exchange.prompt) if reply.echo else reply.text
        usage: dict[str, int] = {}
        if reply.raw is not None:
            payload = reply.raw
        elif reply.status != 200:
            payload = json.dumps({"error": {"message": f"scripted status {reply.status}"}}).encode()
        elif exchange.path == "/v1/chat/completions":
            if reply.prompt_tokens is not None:
                usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": 10}
            payload = json.dumps(
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "length" if reply.cut else "stop",
                        }
                    ],
                    **({"usage": usage} if usage else {}),
                    **({"model": reply.model} if reply.model is not None else {}),
                }
            ).encode()
        elif exchange.path == "/v1/messages":
            if reply.prompt_tokens is not None:
                usage = {"input_tokens": reply.prompt_tokens, "output_tokens": 10}
            payload = json.dumps(
                {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "max_tokens" if reply.cut else "end_turn",
                    **({"usage": usage} if usage else {}),
                    **({"model": reply.model} if reply.model is not None else {}),
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
        self.stopping = threading.Event()
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
        self.stopping.set()
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
