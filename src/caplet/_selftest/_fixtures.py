"""The bench's arena parts: the recording HTTP servers, the log counters, and the
manifest and source of each case's plugin.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from caplet._audit._model import AuditResult, Verdict
from caplet._errors import (
    SelftestError,
)
from caplet._findings import RiskLevel
from caplet._host._host import PluginHost
from caplet._selftest._introspection import (
    APP_CAPABILITY,
)
from caplet._selftest._model import Arena, HostileCase, clip
from caplet._selftest._prelude import PRELUDE

__all__ = [
    "HttpServer",
    "LogCounter",
    "QuietArena",
    "fill_arena",
    "fool_the_review",
    "plugin_manifest",
    "plugin_source",
]


class _Recorder(BaseHTTPRequestHandler):
    """Records each request path; ``/redirect?to=URL`` answers 302 to URL."""

    server: HttpServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        target = parse_qs(urlsplit(self.path).query).get("to")
        if urlsplit(self.path).path == "/redirect" and target:
            self.send_response(302)
            self.send_header("Location", target[0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"reached"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str) -> None:
        self.hits: list[str] = []
        super().__init__((address, 0), _Recorder)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class LogCounter(logging.Handler):
    """Counts the ``ctx.log`` lines each plugin got into the host's log."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        plugin = record.name.removeprefix("caplet.plugins.")
        self.counts[plugin] = self.counts.get(plugin, 0) + 1


class QuietArena(logging.Filter):
    """Drops the host's log records that the attacks cause on purpose.

    The vault handler's failure (logged with a traceback holding the secret)
    and discovery skipping the plugins that are broken by design.
    """

    def __init__(self, root: Path) -> None:
        super().__init__()
        self._root = str(root)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if APP_CAPABILITY in message:
            return False
        return not (message.startswith("skipping plugin") and self._root in message)


def fill_arena(text: str, arena: Arena) -> str:
    for key, value in arena.placeholders().items():
        text = text.replace("{" + key + "}", str(value))
    return text


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)


def plugin_manifest(case: HostileCase, arena: Arena, extra: Sequence[str] = ()) -> str:
    capabilities = ["fs.write:${config.out}", *(fill_arena(c, arena) for c in case.capabilities)]
    capabilities += extra
    lines = [
        f"name = {_toml_string(case.name)}",
        'version = "1.0.0"',
        f"description = {_toml_string(clip('Selftest: ' + case.attack, 190))}",
    ]
    if case.manifest:
        lines.append(fill_arena(case.manifest, arena))
    lines += [
        f"capabilities = [{', '.join(_toml_string(c) for c in capabilities)}]",
        "",
        "[config.out]",
        'type = "string"',
        "",
        "[modules.main]",
        f"functions = [{', '.join(_toml_string(f) for f in case.functions)}]",
    ]
    if case.timeout_ms is not None:
        lines += ["", "[limits]", f"timeout_ms = {case.timeout_ms}"]
    return "\n".join(lines) + "\n"


def plugin_source(body: str) -> str:
    return textwrap.dedent(PRELUDE) + textwrap.dedent(body)


def fool_the_review(host: PluginHost, plugin: str) -> None:
    """Record a clean audit of the plugin's current content, as a fooled auditor would."""
    audit = AuditResult(
        plugin=plugin,
        content_hash=host.manager.current_hash(plugin),
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="caplet selftest: the review was fooled, only the runtime layers stand",
        findings=(),
        provider="selftest",
    )
    if not host.manager.set_audit_result(plugin, audit):
        raise SelftestError(f"case {plugin!r}: could not record its fooled audit")
