"""``caplet mcp``: the enabled plugins' functions as Model Context Protocol tools.

``_tools`` (the catalog: tool names, descriptions and input schemas built
from the manifests, allow/deny, argument checks; no SDK needed),
``_text`` (plugin text made fit for an agent's context), ``_stdio`` (stdin
read in bounded lines), ``_flow`` (requests in flight per session bounded:
``Policy.mcp.max_in_flight``), ``_server`` (the MCP server on the official SDK:
stdio, or streamable HTTP on 127.0.0.1 with a bearer token).
docs/agents.md shows how to wire it into agents.
"""
