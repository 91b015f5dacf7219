"""The MCP server: the catalog's tools, the system message, on the official ``mcp`` SDK.

Built on the SDK's low-level ``Server`` (handlers for ``tools/list``,
``tools/call``, ``resources/list``, ``resources/read``), not its decorator
API: caplet's tools are data (the manifests), not Python functions, and
each must map exactly to one declared function.

* ``tools/list``: the catalog now (:func:`caplet._mcp._tools.build_catalog`
  over the enabled plugins and ``Policy.mcp``); a plugin quarantined while
  serving drops out of it.
* ``tools/call``: an unknown tool (or one the policy does not offer: the
  two cannot be told apart) is a protocol error; everything a call can end
  in (a refusal, bad arguments, a timeout, an open circuit, a quarantine,
  a spent budget, the plugin's own exception) is a tool result with
  ``isError`` and caplet's message, visible characters only. Anything
  unforeseen is an error result too, logged with its traceback on stderr:
  the server never ends over one request. Calls run in the threads of an
  :class:`~caplet.AsyncPluginHost`; a request the client cancels stops the
  worker serving it.
* ``exec`` (only with ``Policy.mcp.exec``): guest code in a zero-capability
  worker; its ``host.*`` calls reach only the offered tools' functions.
* resources: ``caplet://system-message`` (the text an agent adds to its
  system message for the enabled plugins) and ``caplet://stats`` (this
  server's per-plugin metrics, JSON).

Nothing here prompts or reads the terminal: plugins are enabled (and
consented to) before the server starts (``caplet mcp --enable``).
"""

from __future__ import annotations

import base64
import hmac
import json
import math
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final, cast

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from caplet._display import stripped_text
from caplet._errors import CapletError, GuestError
from caplet._host._async import AsyncPluginHost
from caplet._host._guest_result import GuestResult
from caplet._logs import caplet_logger
from caplet._mcp._flow import CountedWriter, GatedReader, InFlight, SessionBound
from caplet._mcp._stdio import AnsweringReader, BoundedLines
from caplet._mcp._text import agent_line, agent_text
from caplet._mcp._tools import EXEC_TOOL, ArgumentError, Catalog, Tool, build_catalog
from caplet._mcp._tools import check_arguments as checked
from caplet._numbers import finite_number
from caplet._version import __version__

__all__ = ["STATS_URI", "SYSTEM_MESSAGE_URI", "TOKEN_ENV", "McpServer"]

_LOG = caplet_logger()

SYSTEM_MESSAGE_URI: Final = "caplet://system-message"
STATS_URI: Final = "caplet://stats"
#: A bearer token for the HTTP transport, instead of a generated one.
TOKEN_ENV: Final = "CAPLET_MCP_TOKEN"  # noqa: S105 - a variable name, not a secret
_TOKEN_FILE: Final = "mcp-token"  # noqa: S105 - a file name, not a secret
#: Longest error message and system message handed to the agent.
_ERROR_CHARS: Final = 4000
_SYSTEM_MESSAGE_CHARS: Final = 64 * 1024
#: Room for the JSON-RPC envelope around the arguments in one message.
_ENVELOPE: Final = 64 * 1024
_INSTRUCTIONS: Final = (
    "caplet runs each tool in the sandbox of the plugin that provides it, with only the "
    "capabilities an administrator approved. A tool's description starts with the plugin's own "
    "text; the line marked [caplet] is caplet's. Read caplet://system-message for how to use "
    "the enabled plugins."
)


class McpServer:
    """One ``caplet mcp`` server over one host (module docstring)."""

    def __init__(self, host: AsyncPluginHost) -> None:
        self.host = host
        self.policy = host.sync.policy.mcp
        self.server: Server[Any] = Server(
            "caplet",
            version=__version__,
            instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self._catalog: tuple[int, Catalog] | None = None
        #: The requests in flight of the session a request belongs to (``_flow``).
        self._flow_of: Callable[[ServerRequestContext[Any]], InFlight | None] = lambda ctx: None
        #: Over HTTP, the bound of every session's requests together (``_flow``).
        self._bound: SessionBound | None = None
        #: Every tool offered in this session: one whose plugin was quarantined or
        #: disabled since is called all the same, so the agent gets caplet's reason as a
        #: tool error instead of "unknown tool" (a tool never offered stays unknown).
        self._offered: dict[str, Tool] = {}

    # -- transports ------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve on stdin/stdout until stdin ends."""
        lines = BoundedLines(sys.stdin.buffer, self.policy.max_argument_bytes + _ENVELOPE)
        flow = InFlight(self.policy.max_in_flight)
        self._flow_of = lambda ctx: flow
        async with stdio_server(stdin=cast(Any, lines)) as (read, write):
            await self.server.run(
                # a line the SDK cannot read is answered, not skipped (attack20)
                GatedReader(AnsweringReader(read, lines, write), flow),
                CountedWriter(write, flow),
                self.server.create_initialization_options(),
            )

    async def serve_http(self, port: int, token: str, announce: Callable[[str], None]) -> None:
        """Serve streamable HTTP on 127.0.0.1:``port`` (0: any free port), requests
        carrying ``Authorization: Bearer <token>`` only; ``announce(url)`` once listening."""
        import uvicorn

        bound = SessionBound(self.policy.max_in_flight, self.policy.max_in_flight_total)
        self.server.middleware.append(bound)
        self._bound = bound
        self._flow_of = bound.flow
        app = self.server.streamable_http_app(
            host="127.0.0.1",
            max_request_body_size=self.policy.max_argument_bytes + _ENVELOPE,
        )
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        from caplet._mcp._http_guard import guarded_h11

        config = uvicorn.Config(
            _BearerOnly(app, token),
            log_level="warning",
            lifespan="on",
            access_log=False,
            http=guarded_h11(),  # bounded connections, a deadline for the first request
        )
        announce(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp")
        await uvicorn.Server(config).serve(sockets=[listener])

    # -- the catalog -------------------------------------------------------------------------

    def catalog(self) -> Catalog:
        """The tools offered now (rebuilt when the host's plugins changed)."""
        sync = self.host.sync
        generation = sync.manager.generation
        cached = self._catalog
        if cached is None or cached[0] != generation:
            cached = self._catalog = (
                generation,
                build_catalog(sync.manager.get_enabled_plugins(), self.policy),
            )
            for name, tool in cached[1].tools.items():
                self._offered[name] = tool
        return cached[1]

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = await anyio.to_thread.run_sync(self.catalog)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    _meta={"caplet/permissive": True} if tool.permissive else None,
                )
                for tool in catalog.tools.values()
            ]
        )

    # -- calls ---------------------------------------------------------------------------------

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        catalog = await anyio.to_thread.run_sync(self.catalog)
        tool = catalog.get(params.name)
        if tool is None and isinstance(params.name, str):
            tool = self._offered.get(params.name)
        if tool is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {agent_line(str(params.name), 80)!r}; tools/list names the "
                "tools this server offers",
            )
        try:
            if tool.name == EXEC_TOOL and not tool.plugin:
                return await self._exec(tool, params.arguments, catalog)
            args, kwargs = checked(tool, params.arguments, self.policy)
            # The agent chose the arguments: a failure never quarantines (attack18).
            value = await self.host.agent_call(tool.plugin, tool.target, *args, **kwargs)
        except (ArgumentError, CapletError) as exc:
            return _error(str(exc))
        except Exception:  # a bug of caplet's: one failed request, never a dead server
            _LOG.exception("caplet mcp: tool %s failed inside caplet", tool.name)
            return _error(
                f"tool {tool.name}: caplet failed while running it (an internal error; the "
                "server's stderr has the details)"
            )
        plain = _jsonable(value)
        return types.CallToolResult(
            content=[types.TextContent(text=_text_of(plain))],
            structured_content={"result": plain},
        )

    async def _exec(
        self, tool: Tool, arguments: Mapping[str, Any] | None, catalog: Catalog
    ) -> types.CallToolResult:
        _, given = checked(tool, arguments, self.policy)
        code = given.get("code")
        timeout = given.get("timeout_s")
        if not isinstance(code, str):
            raise ArgumentError("tool exec: `code` must be a string of Python source")
        if timeout is not None and (not finite_number(timeout) or timeout <= 0):
            raise ArgumentError("tool exec: `timeout_s` must be a positive number of seconds")
        offered = catalog.offered

        def gate(plugin: str, target: str) -> str | None:
            if (plugin, target) in offered:
                return None
            return (
                f"{target} of plugin '{plugin}' is not offered to agents by this server "
                "(Policy.mcp allow/deny)"
            )

        try:
            # Unconverted: an int past a float's range is the host's to refuse (attack14).
            result = await self.host.exec(code, timeout=timeout, gate=gate)
        except GuestError as exc:
            return _error(str(exc))
        return _guest_result(result)

    # -- resources -----------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=SYSTEM_MESSAGE_URI,
                    name="system-message",
                    description="What an agent adds to its system message for the enabled "
                    "plugins: their modules, functions and hints.",
                    mime_type="text/markdown",
                ),
                types.Resource(
                    uri=STATS_URI,
                    name="stats",
                    description="Per-plugin metrics of this server (calls, failures, latency, "
                    "CPU, memory, brokered traffic, budgets).",
                    mime_type="application/json",
                ),
            ]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        sync = self.host.sync
        if uri == SYSTEM_MESSAGE_URI:
            # Only the offered tools' plugins and functions: a hidden tool is invisible.
            offered = (await anyio.to_thread.run_sync(self.catalog)).offered
            text = await anyio.to_thread.run_sync(
                lambda: sync.get_system_message_additions(
                    offers=lambda plugin, target: (plugin, target) in offered
                )
            )
            text = agent_text(text, _SYSTEM_MESSAGE_CHARS)
            mime = "text/markdown"
        elif uri == STATS_URI:
            stats = await anyio.to_thread.run_sync(sync.observer.stats)
            document: dict[str, Any] = {"plugins": [s.to_json() for s in stats]}
            flow = self._flow_of(ctx)
            if flow is not None:
                # This session's requests in flight, this one included (``_flow``), and
                # over HTTP every session's together.
                document["mcp"] = {"in_flight": flow.count, "max_in_flight": flow.bound}
                if self._bound is not None:
                    document["mcp"]["in_flight_total"] = self._bound.count
                    document["mcp"]["max_in_flight_total"] = self._bound.total
            text = json.dumps(document)
            mime = "application/json"
        else:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown resource {agent_line(uri, 120)!r}; resources/list names them",
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )


# -- results -----------------------------------------------------------------------------------


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=agent_text(message, _ERROR_CHARS))], is_error=True
    )


def _jsonable(value: object) -> Any:
    """A result as JSON (bytes as ``{"base64": ...}``; a channel result is JSON-like already)."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _text_of(value: Any) -> str:
    """The result as the text the agent reads: visible characters only, as an error, a
    description and guest code's output are (attack14: a plugin's result, or a page it
    fetched, carried instructions in Unicode tag characters no reviewer sees). Removing
    characters inside JSON strings keeps the JSON valid; the structured content keeps
    the exact data."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return stripped_text(text)


def _guest_result(result: GuestResult) -> types.CallToolResult:
    parts = []
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr}")
    if result.value_repr is not None:
        parts.append(f"value: {result.value_repr}")
    if result.error is not None:
        parts.append(f"error ({result.status.value}):\n{result.error}")
    if result.truncated:
        parts.append("[caplet: output over the policy's limit was dropped]")
    text = "\n".join(parts) or f"(no output; status {result.status.value})"
    return types.CallToolResult(
        content=[types.TextContent(text=agent_text(text, 64 * 1024))],
        structured_content={
            "status": result.status.value,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "value": _jsonable(result.value),
            "repr": result.value_repr,
            "error": result.error,
            "error_type": result.error_type,
        },
        is_error=not result.ok,
    )


# -- the HTTP transport's token ------------------------------------------------------------------


def http_token(state_dir: Path) -> tuple[str, Path | None]:
    """The bearer token: ``CAPLET_MCP_TOKEN``, else a new one written to
    ``<state dir>/mcp-token`` (mode 0600); returns it and the file (None: from the
    environment)."""
    given = os.environ.get(TOKEN_ENV, "")
    if given:
        if len(given) < 16:
            raise CapletError(
                f"{TOKEN_ENV} is shorter than 16 characters; use a long random token "
                "(or unset it and caplet mcp writes one)"
            )
        return given, None
    token = secrets.token_urlsafe(32)
    path = state_dir / _TOKEN_FILE
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(token + "\n")
    return token, path


class _BearerOnly:
    """ASGI: HTTP requests without ``Authorization: Bearer <token>`` get 401.

    The server listens on 127.0.0.1 only, but every local user and process
    can reach that; the tools carry the capabilities the operator approved,
    so the transport demands the operator's token (compared in constant
    time). The SDK's DNS-rebinding protection (Host and Origin checks) stays
    on underneath.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope.get("type") == "http":
            given = b""
            for key, value in scope.get("headers", ()):
                if key.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"caplet mcp: a bearer token is required (Authorization: "
                        b"Bearer <the token in the file caplet mcp named>)\n",
                    }
                )
                return
        await self._app(scope, receive, send)
