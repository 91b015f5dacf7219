"""The tool catalog: each enabled plugin's declared functions as MCP tools.

No MCP SDK is needed here (tests and ``caplet mcp --list`` use it alone).

**Names.** A tool is named ``MODULE_FUNCTION`` (``fsread_read_file``):
what the guest imports as ``host.fsread.read_file``, in the characters
every agent's API accepts (``[A-Za-z0-9_-]``, at most 64: Anthropic's and
OpenAI's tool-name rule; MCP allows more). Names come from manifests, so
a plugin could try to name a tool like another plugin's, or like caplet's
own ``exec``. Rule: a name that is taken twice, reserved (``exec``,
``caplet*``), longer than 64 or not plain ASCII goes to *every* tool that
wants it in a qualified form, ``MODULE_FUNCTION_<12 hex of sha256(plugin,
module, function)>``; so no plugin can take a name from another by sorting
first, and a plugin cannot choose its digest. A name still taken twice
after that (a 48-bit collision, worked for) is withheld from both, and
logged.

**Descriptions** are caplet's line naming the plugin, its version and the
function first, then the plugin's own text (the function's description,
else the module's, else the plugin's; the hints' overview and critical
rules), with invisible characters removed and the whole bounded
(``Policy.mcp.max_description_chars``).

**Input schemas.** MCP tools take one JSON object. A function's declared
``args`` schema describes its positional arguments as one array, so the
tool's schema is ``{"args": <that schema>}`` (its local ``$ref``\\ s
rebased under ``/properties/args``); a function without one gets a
permissive schema (``args`` any array, ``kwargs`` any object), marked in
the description and in the tool's ``_meta`` (``caplet/permissive``). The
host still checks the declared schema on every call; the listed one is for
the agent. A schema over :data:`MAX_SCHEMA_BYTES` is listed permissive too
(it would fill the context), and says so.

**Arguments** from the agent are model output: :func:`check_arguments`
bounds their size and depth (``Policy.mcp``) before anything else looks at
them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from caplet._host._mcp_policy import McpPolicy, every_tool
from caplet._host._records import PluginInfo
from caplet._logs import caplet_logger
from caplet._mcp._text import agent_line, agent_text

__all__ = [
    "EXEC_TOOL",
    "MAX_SCHEMA_BYTES",
    "ArgumentError",
    "Catalog",
    "Tool",
    "build_catalog",
    "check_arguments",
]

_LOG = caplet_logger()

#: The guest-code tool's name (never a plugin's).
EXEC_TOOL: Final = "exec"
#: The longest tool name (Anthropic's and OpenAI's APIs take 64).
MAX_NAME: Final = 64
_DIGEST: Final = 12
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A listed input schema larger than this (as JSON) is replaced by the permissive one.
MAX_SCHEMA_BYTES: Final = 16 * 1024
_REF_KEYS: Final = ("$ref", "$dynamicRef")
_DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples"})
#: The schema's annotations a model reads as prose: stripped as descriptions are.
_PROSE_KEYWORDS: Final = frozenset({"description", "title"})
PERMISSIVE_META: Final = "caplet/permissive"


class ArgumentError(Exception):
    """A tool call's arguments were refused before anything ran (the message says why)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One offered tool: its MCP face and the function behind it (None for ``exec``)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    plugin: str = ""
    target: str = ""
    permissive: bool = False
    #: The function declares an ``args`` schema: only positional arguments are accepted.
    positional_only: bool = False

    @property
    def qualified(self) -> str:
        """``plugin/module.function`` (what allow/deny globs may name)."""
        return f"{self.plugin}/{self.target}" if self.plugin else self.name


@dataclass(frozen=True, slots=True)
class Catalog:
    """The offered tools by name, and the functions guest code may call (``exec``)."""

    tools: Mapping[str, Tool] = field(default_factory=dict)
    #: ``(plugin, "module.function")`` pairs offered as tools.
    offered: frozenset[tuple[str, str]] = frozenset()

    def get(self, name: object) -> Tool | None:
        return self.tools.get(name) if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class _Wanted:
    plugin: str
    module: str
    function: str
    base: str


def build_catalog(plugins: Iterable[PluginInfo], policy: McpPolicy) -> Catalog:
    """The tools offered for ``plugins`` (the enabled ones) under ``policy`` (module docstring)."""
    infos = sorted(plugins, key=lambda info: info.name)
    wanted = [
        _Wanted(info.name, module.name, function.name, f"{module.name}_{function.name}")
        for info in infos
        for module in info.manifest.modules
        for function in module.functions
    ]
    counts: dict[str, int] = {}
    for entry in wanted:
        counts[entry.base] = counts.get(entry.base, 0) + 1
    named: dict[str, list[_Wanted]] = {}
    for entry in wanted:
        plain = (
            counts[entry.base] == 1
            and _PLAIN_NAME.fullmatch(entry.base) is not None
            and not _reserved(entry.base)
        )
        name = entry.base if plain else _qualified(entry)
        named.setdefault(name, []).append(entry)
    by_name = {info.name: info for info in infos}
    candidates: list[tuple[str, _Wanted, tuple[str, ...]]] = []
    for name, entries in sorted(named.items()):
        if len(entries) > 1:
            _LOG.warning(
                "caplet mcp: tool name %s is wanted by %s; none of them is offered",
                name,
                ", ".join(f"{e.plugin}/{e.module}.{e.function}" for e in entries),
            )
            continue
        entry = entries[0]
        # Deny is also matched on the unqualified name: a plugin that makes another's
        # name contested (so it gains a digest) must not slip it past `--deny NAME`.
        globs = policy.allowing(name, f"{entry.plugin}/{entry.module}.{entry.function}")
        if globs and not policy.hides(entry.base):
            candidates.append((name, entry, globs))
    spanning = _spanning(candidates)
    tools: dict[str, Tool] = {}
    offered: set[tuple[str, str]] = set()
    for name, entry, globs in candidates:
        if all(glob in spanning for glob in globs):
            continue
        tools[name] = _tool(name, by_name[entry.plugin], entry, policy)
        offered.add((entry.plugin, f"{entry.module}.{entry.function}"))
    if policy.exec and policy.offers(EXEC_TOOL):
        tools[EXEC_TOOL] = _exec_tool(policy)
    return Catalog(tools, frozenset(offered))


def _spanning(candidates: Sequence[tuple[str, _Wanted, tuple[str, ...]]]) -> frozenset[str]:
    """The allow globs that match the tools of more than one plugin, each warned about.

    A tool name is a module and a function any plugin may declare, so a glob written
    for one plugin's tools (``fsread_*``) would offer another's that share the prefix
    (decide14): such a glob offers none of them, and the operator is told how to name
    the plugin. ``*`` (and ``*/*``) says "every tool" as written, and spans plugins.
    """
    plugins: dict[str, set[str]] = {}
    for _name, entry, globs in candidates:
        for glob in globs:
            plugins.setdefault(glob, set()).add(entry.plugin)
    spanning = {g for g, found in plugins.items() if len(found) > 1 and not every_tool(g)}
    for glob in sorted(spanning):
        names = sorted(plugins[glob])
        _LOG.warning(
            "caplet mcp: allow glob %s matches the tools of plugins %s; it offers none of "
            "them (a tool name is a module and function any plugin may declare): name the "
            "plugin, e.g. --allow '%s/*' or [mcp] allow = [\"%s/MODULE.FUNCTION\"]",
            glob,
            ", ".join(names),
            names[0],
            names[0],
        )
    return frozenset(spanning)


def _reserved(name: str) -> bool:
    return name == EXEC_TOOL or name.lower().startswith("caplet")


def _qualified(entry: _Wanted) -> str:
    digest = hashlib.sha256(
        f"{entry.plugin}\0{entry.module}\0{entry.function}".encode("utf-8", "surrogatepass")
    ).hexdigest()[:_DIGEST]
    ascii_base = re.sub(r"[^A-Za-z0-9_-]", "_", entry.base)[: MAX_NAME - _DIGEST - 1]
    return f"{ascii_base}_{digest}"


def _tool(name: str, info: PluginInfo, entry: _Wanted, policy: McpPolicy) -> Tool:
    manifest = info.manifest
    module = next(m for m in manifest.modules if m.name == entry.module)
    function = next(f for f in module.functions if f.name == entry.function)
    limit = policy.max_description_chars
    target = f"{entry.module}.{entry.function}"
    schema, permissive, why = _input_schema(function.args_schema)
    own = function.description or module.description or manifest.description
    ours = agent_line(
        f"[caplet] Function {target} of plugin '{info.name}' {manifest.version}, run in its "
        f"sandbox. {why}",
        limit,
    )
    # The plugin's text shares what is left with its hints, and can neither push caplet's
    # line out (it is bounded around it) nor forge one (its "[caplet" is rewritten).
    room = max(limit - len(ours) - 2, 0)
    first = _theirs(agent_line(own, room // 2) or f"{target} of plugin {info.name}.")
    hints = manifest.hints
    notes = []
    if hints.overview:
        notes.append("Plugin notes: " + agent_line(hints.overview, limit))
    if hints.critical_rules:
        notes.append("Rules: " + "; ".join(agent_line(r, limit) for r in hints.critical_rules))
    rest = _theirs(agent_text("\n".join(notes), max(room - len(first) - 1, 0)))
    description = "\n".join(part for part in (first, ours, rest) if part)
    return Tool(
        name,
        description,
        schema,
        plugin=info.name,
        target=target,
        permissive=permissive,
        positional_only=function.args_schema is not None,
    )


def _theirs(text: str) -> str:
    """Plugin text that cannot pass for caplet's own line."""
    return re.sub(r"\[\s*caplet", "[plugin text", text, flags=re.IGNORECASE)


def _input_schema(args_schema: Mapping[str, object] | None) -> tuple[dict[str, Any], bool, str]:
    """(the tool's input schema, permissive?, what the description says about it)."""
    if args_schema is not None:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"args": _rebased(args_schema)},
            "required": ["args"],
            "additionalProperties": False,
        }
        if len(json.dumps(schema)) <= MAX_SCHEMA_BYTES:
            return (
                schema,
                False,
                "Pass the positional arguments as the array `args`; the plugin's schema is "
                "checked before it runs.",
            )
        why = (
            "Its declared argument schema is too large to list; the host still checks every "
            "call against it. Pass the positional arguments as the array `args`."
        )
    else:
        why = (
            "It declares no argument schema (permissive): pass positional arguments as the "
            "array `args` and keyword arguments as the object `kwargs`."
        )
    permissive = {
        "type": "object",
        "description": "caplet: permissive schema (the plugin declares none that can be listed)",
        "properties": {
            "args": {"type": "array", "description": "Positional arguments, each a JSON value."},
            "kwargs": {"type": "object", "description": "Keyword arguments."},
        },
        "additionalProperties": False,
    }
    return permissive, True, why


def _rebased(schema: Mapping[str, object]) -> dict[str, Any]:
    """A copy of ``schema`` to nest at ``/properties/args``: local references rebased,
    ``$schema`` and ``$id`` dropped (they belong at a document's root), and every
    ``description`` and ``title`` stripped of what a reviewer cannot see, as the tool's
    own description is (they reached the model with Unicode tag characters and bidi
    controls in them: textpin's report). Data (``const``, ``enum``, ``default``,
    ``examples``) is left exact: it is what the call must send."""
    copied: dict[str, Any] = copy.deepcopy(dict(schema))
    copied.pop("$schema", None)
    copied.pop("$id", None)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in list(node.items()):
                if key in _REF_KEYS and isinstance(value, str) and value.startswith("#"):
                    rest = value[1:]
                    if rest == "" or rest.startswith("/"):
                        node[key] = "#/properties/args" + rest
                elif key in _PROSE_KEYWORDS and isinstance(value, str):
                    node[key] = _theirs(agent_text(value, len(value)))
                elif key not in _DATA_KEYWORDS:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(copied)
    return copied


def _exec_tool(policy: McpPolicy) -> Tool:
    description = (
        "Run Python code in caplet's zero-capability sandbox (no files, network, environment "
        "or programs). Its only way out is the plugins' tools offered here: "
        "`import host.<module>` and call `<module>.<function>(...)`. Returns stdout, stderr "
        "and the value of the last expression. Read the resource caplet://system-message "
        "for the modules and their functions."
    )
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python source to run."},
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds the code may run (default: the policy's).",
            },
        },
        "required": ["code"],
        "additionalProperties": False,
    }
    return Tool(EXEC_TOOL, agent_text(description, policy.max_description_chars), schema)


def check_arguments(
    tool: Tool, arguments: Mapping[str, Any] | None, policy: McpPolicy
) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` for a function tool, or ``({code...})`` checks for ``exec``.

    Raises :class:`ArgumentError` for arguments over the size or depth bound
    (measured without recursion, so no nesting can exhaust the stack) or of
    the wrong shape.
    """
    given: Mapping[str, Any] = arguments or {}
    _bounded(given, policy.max_argument_bytes, policy.max_argument_depth)
    allowed = (
        {"code", "timeout_s"}
        if tool.name == EXEC_TOOL and not tool.plugin
        else {
            "args",
            "kwargs",
        }
    )
    unknown = sorted(str(k) for k in given if k not in allowed)
    if unknown:
        raise ArgumentError(
            f"tool {tool.name}: unknown argument(s) {', '.join(agent_line(u, 60) for u in unknown)}"
            f"; it takes {', '.join(sorted(allowed))}"
        )
    if not tool.plugin:
        return [], dict(given)
    args = given.get("args", [])
    kwargs = given.get("kwargs", {})
    if not isinstance(args, list):
        raise ArgumentError(f"tool {tool.name}: `args` must be an array of positional arguments")
    if not isinstance(kwargs, dict):
        raise ArgumentError(f"tool {tool.name}: `kwargs` must be an object of keyword arguments")
    if kwargs and tool.positional_only:
        raise ArgumentError(
            f"tool {tool.name}: its plugin declares a schema for positional arguments only; "
            "pass them in `args`"
        )
    if any(not isinstance(k, str) or not k.isidentifier() for k in kwargs):
        raise ArgumentError(f"tool {tool.name}: every key of `kwargs` must be an identifier")
    return args, kwargs


def _bounded(value: object, max_bytes: int, max_depth: int) -> None:
    """Refuse ``value`` when its JSON would exceed ``max_bytes`` or nest over ``max_depth``."""
    size = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > max_depth:
                raise ArgumentError(
                    f"arguments nest deeper than {max_depth} levels (Policy.mcp."
                    "max_argument_depth); flatten them"
                )
            size += 2
            items: Sequence[object] = (
                [x for pair in node.items() for x in pair] if isinstance(node, dict) else node
            )
            size += len(items)
            stack.extend((item, depth + 1) for item in items)
        elif isinstance(node, str):
            size += len(node.encode("utf-8", "surrogatepass")) + 2
        elif isinstance(node, float) and not math.isfinite(node):
            # JSON has no infinity or NaN: the SDK's parser reads ``1e400`` as inf and
            # takes ``NaN``/``Infinity`` as written, and a tool without a declared schema
            # handed them on to the plugin as numbers the agent never wrote.
            raise ArgumentError(
                f"arguments hold a number that is not finite ({node!r}: a JSON number past a "
                "float's range, or NaN/Infinity); send a finite number, or a string"
            )
        else:
            size += 8
        if size > max_bytes:
            raise ArgumentError(
                f"arguments larger than {max_bytes} bytes (Policy.mcp.max_argument_bytes); "
                "send less, or raise the limit in the policy"
            )
