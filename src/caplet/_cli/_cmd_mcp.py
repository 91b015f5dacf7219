"""``caplet mcp``: serve the enabled plugins' functions to an agent over MCP."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import typer

from caplet._cli._command import Run, command
from caplet._cli._enabling import EnableUsageError, enable_all, split_enable_groups
from caplet._cli._options import Common, ConsentFlag
from caplet._cli._safe import plain
from caplet._host._policy_file import PolicyOverride

__all__: list[str] = []

_MISSING_SDK = (
    "caplet mcp needs the MCP SDK, which is not installed: pip install 'caplet[mcp]' "
    "(the official `mcp` package, version 2.3 or later)"
)


@command(
    "mcp", common=Common.RUNS & ~Common.JSON, context_settings={"ignore_unknown_options": True}
)
def mcp_command(
    run: Run,
    *,
    tokens: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[--enable NAME [k=v ...]]...",
            help="The plugins to enable before serving, each with its configuration.",
        ),
    ] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            metavar="GLOB",
            help="Offer only tools matching GLOB (a tool name such as fsread_*, or "
            "PLUGIN/MODULE.FUNCTION such as fs-read/*); repeatable; replaces the policy's "
            "mcp.allow.",
        ),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option(
            "--deny",
            metavar="GLOB",
            help="Hide tools matching GLOB (repeatable; adds to the policy's mcp.deny). A "
            "hidden tool is not listed and cannot be called, from guest code either.",
        ),
    ] = None,
    exec_tool: Annotated[
        bool,
        typer.Option(
            "--exec",
            help="Offer the exec tool: agent-written Python in a zero-capability sandbox "
            "whose only way out is the offered tools (policy mcp.exec).",
        ),
    ] = False,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=0,
            max=65535,
            help="Serve streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio; "
            "requests need the bearer token caplet names on stderr.",
        ),
    ] = None,
    yes: ConsentFlag = False,
) -> None:
    """Serve the enabled plugins' functions as MCP tools (stdio by default).

    Each declared function of each enabled plugin is a tool (MODULE_FUNCTION);
    the text to add to the agent's system message is the resource
    caplet://system-message. Plugins are enabled before serving, with --enable
    NAME k=v; enabling one that is not approved needs --yes (nothing is ever
    asked: stdin is the agent's). docs/agents.md has the configuration for
    Claude Desktop, Claude Code, the OpenAI Agents SDK and LangChain.
    """
    try:
        groups, rest = split_enable_groups(tokens or [])
    except EnableUsageError as exc:
        run.usage(str(exc))
    if rest:
        run.usage(
            f"unexpected argument(s) {' '.join(rest)!r}: caplet mcp takes --enable NAME "
            "[k=v ...], --allow GLOB, --deny GLOB, --exec and --http PORT"
        )
    try:
        from caplet._host._async import AsyncPluginHost
        from caplet._mcp._server import McpServer, http_token
    except ImportError:
        run.usage(_MISSING_SDK)
    overrides = [
        PolicyOverride("mcp.allow", glob, "--allow", appended=index > 0)
        for index, glob in enumerate(allow or ())
    ]
    if allow:
        # The first --allow replaces the default "*": listing what to offer means only that.
        overrides[0] = PolicyOverride("mcp.allow", list(allow[:1]), "--allow")
    overrides += [PolicyOverride("mcp.deny", glob, "--deny", appended=True) for glob in deny or ()]
    if exec_tool:
        overrides.append(PolicyOverride("mcp.exec", True, "--exec"))
    run.options = dataclasses.replace(run.options, overrides=(*run.options.overrides, *overrides))
    host = run.host(prompts=False)
    enable_all(run, host, groups, yes=yes, interactive=False)
    enabled = [info.name for info in host.manager.get_enabled_plugins()]
    err = run.out.err
    async_host = AsyncPluginHost.around(host)
    server = McpServer(async_host)
    tools = sorted(server.catalog().tools)
    err.print(
        plain(
            f"caplet mcp: {len(tools)} tool(s) from {len(enabled)} enabled plugin(s)"
            + (f" ({', '.join(enabled)})" if enabled else "; enable plugins with --enable NAME")
            + f"; isolation: {host.isolation}"
        )
    )
    import anyio

    try:
        if http is None:
            anyio.run(server.serve_stdio)
        else:
            token, token_file = http_token(host.manager.state_dir)
            where = f"in {token_file}" if token_file is not None else "from CAPLET_MCP_TOKEN"

            def announce(url: str) -> None:
                err.print(plain(f"caplet mcp: serving {url} (bearer token {where})"))
                sys.stderr.flush()

            anyio.run(server.serve_http, http, token, announce)
    except KeyboardInterrupt:
        pass
    finally:
        # Its threads, then the host with every worker (Run.close finds it closed).
        anyio.run(async_host.close)
