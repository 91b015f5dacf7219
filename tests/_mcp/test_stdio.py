"""``caplet mcp``'s stdin: a line the SDK cannot read is answered, and the server goes on.

A real server subprocess spoken to in raw lines (no SDK client, which never
writes such lines). Before attack20 the SDK skipped each of these lines in
silence, and a client waiting for the answer to its request waited forever.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from caplet._mcp._stdio import INVALID_REQUEST, PARSE_ERROR, unreadable_answer
from tests._mcp.mcpkit import INITIALIZE, mcp_command
from tests.conftest import PluginFactory

SOURCE = """
def create_functions(config):
    return {"notes": {"echo": lambda text: text}}
"""
MANIFEST = """
name = "notes"
version = "1.0.0"
description = "Notes for tests."

[modules.notes]
functions = ["echo"]
"""


@pytest.fixture
def workspace(tmp_path: Path, make_plugin: PluginFactory) -> Path:
    make_plugin("notes", manifest=MANIFEST, source=SOURCE)
    return tmp_path


def _echo(request_id: bytes, text: bytes) -> bytes:
    """A tools/call line whose id and argument are as written (escapes, bytes)."""
    return (
        b'{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": '
        b'{"name": "notes_echo", "arguments": {"args": ["%s"]}}}\n' % (request_id, text)
    )


@contextmanager
def _server(
    workspace: Path, *extra: str, stderr: list[str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``caplet mcp``, initialised; its stderr, once it ended, into ``stderr``."""
    process = subprocess.Popen(
        mcp_command(workspace, *extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env={**os.environ, "NO_COLOR": "1", "CAPLET_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert process.stdin is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    try:
        yield process
    finally:
        process.stdin.close()
        process.wait(timeout=60)
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        errors = process.stderr.read().decode()
        process.stderr.close()
        assert "Traceback" not in errors
        assert process.returncode == 0, errors
        if stderr is not None:
            stderr.append(errors)


def _answers(process: subprocess.Popen[bytes], last: int) -> list[dict[str, Any]]:
    """Every answer up to the one to request ``last``, in the order written."""
    assert process.stdout is not None
    answers: list[dict[str, Any]] = []
    while not answers or answers[-1].get("id") != last:
        line = process.stdout.readline()
        assert line, f"the server ended before answering {last}: {answers}"
        answers.append(json.loads(line))
    return answers


def test_unreadable_lines_are_answered_with_their_id_and_the_server_goes_on(
    workspace: Path,
) -> None:
    with _server(workspace) as process:
        assert process.stdin is not None
        process.stdin.write(_echo(b"1", b"\\ud800"))  # a lone surrogate's escape
        process.stdin.write(_echo(b"2", b"\xff\xfe"))  # bytes that are not UTF-8
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"\n')  # cut short
        process.stdin.write(_echo(b'"\\udc80"', b"x"))  # an id no answer can carry
        process.stdin.write(b"[1, 2]\n")
        process.stdin.write(b"[" * 100_000 + b"\n")  # nested past Python's reader's stack
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notes/\\ud800"}\n')  # notification
        process.stdin.write(b"\n  \r\n")  # blank lines: no message, so no answer either
        # the near miss: a pair of surrogate escapes is one character, and UTF-8 is UTF-8
        process.stdin.write(_echo(b"4", "\\ud83d\\ude00 caf\u00e9".encode()))
        process.stdin.flush()
        answers = _answers(process, 4)
    assert answers[0]["id"] == 0
    shown = [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers[1:-1]]
    lone = (
        "caplet mcp: the message holds a lone surrogate escape (such as \\ud800), which is "
        "no Unicode character; send each character outside the BMP as its escaped pair"
    )
    not_json = "caplet mcp: the line is not JSON; send one JSON-RPC 2.0 message a line, as UTF-8"
    assert shown == [
        (1, INVALID_REQUEST, lone),
        (2, INVALID_REQUEST, "caplet mcp: the line is not UTF-8; send each message as UTF-8 JSON"),
        (None, PARSE_ERROR, not_json),
        (None, INVALID_REQUEST, lone),
        (
            None,
            INVALID_REQUEST,
            'caplet mcp: not a JSON-RPC 2.0 message: expected an object with "jsonrpc": '
            '"2.0" and a method (a request, with an int or string id) or a result',
        ),
        (None, PARSE_ERROR, not_json),
    ]
    assert answers[-1]["result"]["content"][0]["text"] == "\U0001f600 caf\u00e9"


def test_a_blank_line_is_not_answered() -> None:
    for line in ("\n", "  \r\n", "\t\n"):
        assert unreadable_answer(line) is None, repr(line)


def test_a_notification_the_sdk_cannot_read_is_not_answered() -> None:
    assert unreadable_answer('{"jsonrpc": "2.0", "method": "x/\\ud800"}\n') is None
    answer = unreadable_answer('{"jsonrpc": "2.0", "id": 7, "method": "x/\\ud800"}\n')
    assert answer is not None
    assert (answer.id, answer.error.code) == (7, INVALID_REQUEST)


def test_a_response_the_sdk_cannot_read_is_not_answered() -> None:
    """attack21: JSON-RPC answers no response, as no notification: ids of the client's
    requests and of the server's are each side's own, so an error carrying a malformed
    response's id 7 resolved the client's own request 7 (a tools/call in flight) with
    it."""
    for line in (
        '{"jsonrpc": "2.0", "id": 7, "error": 5}\n',
        '{"jsonrpc": "2.0", "id": 7, "result": {"x": "\\ud800"}}\n',
    ):
        assert unreadable_answer(line) is None
    # the near miss: a request is answered, its id the line's, result or not beside it
    answer = unreadable_answer('{"jsonrpc": "2.0", "id": 7, "method": 5, "result": 1}\n')
    assert answer is not None
    assert answer.id == 7


def test_an_oversized_line_is_answered_once_with_a_null_id_and_the_server_goes_on(
    workspace: Path,
) -> None:
    """mend19: a line over the reader's limit was read to its end and dropped with a note
    on stderr only, and a client waiting for that request's answer waited forever. It is
    answered once, an invalid request with a null id (its id is in the part not kept, and
    a guessed one could name another request), whether it was a request, a notification
    or a response: which it was cannot be known without keeping it."""
    limit = 2048 + 64 * 1024  # max_argument_bytes plus the envelope's room
    errors: list[str] = []
    with _server(workspace, "--set", "mcp.max_argument_bytes=2048", stderr=errors) as process:
        assert process.stdin is not None
        process.stdin.write(_echo(b"1", b"z" * (limit + 10)))  # a request over the limit
        process.stdin.write(_echo(b"2", b"y" * 3 * 1024 * 1024))  # 3 MiB, read in chunks
        # the near misses: a line just under the limit is read, and answered with its id
        # (its argument is over max_argument_bytes: the policy's refusal, not the reader's);
        # an ordinary request after all of it is served
        near = _echo(b"3", b"")
        process.stdin.write(_echo(b"3", b"x" * (limit - len(near))))
        process.stdin.write(_echo(b"4", b"alive"))
        process.stdin.flush()
        answers = _answers(process, 4)
    assert answers[0]["id"] == 0
    too_long = (
        f"caplet mcp: the message is over {limit} bytes (Policy.mcp.max_argument_bytes plus "
        "room for the envelope) and was not read; send smaller arguments or raise "
        "mcp.max_argument_bytes"
    )
    shown = [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers[1:3]]
    assert shown == [(None, INVALID_REQUEST, too_long)] * 2
    assert answers[3]["id"] == 3
    assert "arguments larger than 2048 bytes" in answers[3]["result"]["content"][0]["text"]
    assert answers[4]["result"]["content"][0]["text"] == "alive"
    assert len(answers) == 5
    assert errors[0].count("dropped a message of") == 2, "and each is still noted on stderr"
