"""The rule visitor's reporting: what one resolved reference, import, call or store is.

:class:`Reporting` is a mixin of :class:`caplet._scan._visitor.RuleVisitor`
(split out of it by concern, issue 16: the visitor walks the nodes and picks
what to check, this module turns one checked node into findings and tags):
API rules for a bare reference, module rules for an import, the process, file
and environment capabilities with what the manifest's grants cover, and
global mutation of interpreter-wide state.
"""

from __future__ import annotations

import ast
import sys
from pathlib import PurePosixPath

from caplet._scan._correlate import TAG_APIS, Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._rules import (
    API_RULES,
    DYNAMIC_IMPORTERS,
    ENV_FUNCTIONS,
    ENVIRON_MAPPINGS,
    IMPORT_STATE,
    MODULE_RULES,
    OPEN_FUNCTIONS,
    OS_OPEN_WRITE_FLAGS,
    ArgumentSpec,
)
from caplet._scan._sink_commands import launches_payload
from caplet._scan._sinks import Sinks
from caplet._scan._sources import DECODERS, EXECUTORS, SHELLS
from caplet._scan._syntax import argument, fold_str

__all__ = ["MUTABLE_STATE", "STDLIB", "Reporting", "reportable"]

#: Containers whose items are interpreter-wide state (imports, builtins).
MUTABLE_STATE = IMPORT_STATE | {"builtins.__dict__"}
STDLIB = frozenset(sys.stdlib_module_names)
#: Mitigations (plugin mode) by fully qualified name (the visitor has the bare attributes).
_MITIGATION_APIS = {
    "os.path.realpath": "CPL-MIT-001",
    "os.path.islink": "CPL-MIT-001",
    "os.O_NOFOLLOW": "CPL-MIT-001",
    "os.path.commonpath": "CPL-MIT-002",
    "os.path.commonprefix": "CPL-MIT-002",
    "os.path.getsize": "CPL-MIT-003",
}
#: Names a bare reference can be reported for, and the first components of
#: flagged modules: anything else is skipped without splitting it.
_REFERENCE_NAMES = (
    frozenset(API_RULES)
    | ENVIRON_MAPPINGS
    | ENV_FUNCTIONS
    | frozenset(OPEN_FUNCTIONS)
    | frozenset(TAG_APIS)
    | frozenset(_MITIGATION_APIS)
    | DECODERS
)
_MODULE_ROOTS = frozenset(m.split(".", 1)[0] for m in MODULE_RULES)
#: By the names a reference may denote, those a rule can report (memoised for every
#: file: the same few thousand resolutions come back, ``builtins.len``, ``self.x``...).
_REPORTABLE: dict[tuple[str, ...], tuple[str, ...]] = {}
#: Past this many remembered resolutions the memo starts again (bounded memory).
_MAX_REPORTABLE = 65_536


def reportable(candidates: tuple[str, ...]) -> tuple[str, ...]:
    """The names of ``candidates`` a rule may report (memoised, see :func:`_reportable`)."""
    found = _REPORTABLE.get(candidates)
    return _reportable(candidates) if found is None else found


def _reportable(candidates: tuple[str, ...]) -> tuple[str, ...]:
    """The names of ``candidates`` a rule may report: those of :data:`_REFERENCE_NAMES`
    and those in a flagged module."""
    found = tuple(
        name
        for name in candidates
        if name in _REFERENCE_NAMES or name.split(".", 1)[0] in _MODULE_ROOTS
    )
    if len(_REPORTABLE) >= _MAX_REPORTABLE:
        _REPORTABLE.clear()
    _REPORTABLE[candidates] = found
    return found


class Reporting:
    """Findings and tags of one checked node (the state is the visitor's)."""

    _scan: FileScan
    _sinks: Sinks
    flow: Flow
    #: Nodes that are the callee of a call.
    _called: set[int]
    #: Modules already reported at a first use.
    _flagged_modules: set[str]

    def resolve(self, node: ast.AST) -> tuple[str, ...]:
        return self.flow.resolve(node)

    # -- reporting helpers ------------------------------------------------------------------

    def _report_reference(self, node: ast.AST, candidates: tuple[str, ...]) -> None:
        """API rules for a reference that no enclosing call has reported."""
        reportable = _REPORTABLE.get(candidates)
        if reportable is None:
            reportable = _reportable(candidates)
        if not reportable:
            return  # most references: nothing any rule reports (issue 16's speed)
        scan = self._scan
        line = getattr(node, "lineno", 0)
        for name in reportable:
            tag = TAG_APIS.get(name)
            if tag is not None:
                scan.tag(tag, line, name)
            mitigation = _MITIGATION_APIS.get(name)
            if mitigation is not None:
                scan.mitigation(mitigation, name, line, getattr(node, "col_offset", None))
            if name in DECODERS:
                scan.tag(Tag.DECODE, line, name)
            rule_id = API_RULES.get(name)
            if (
                # exec fetched through __import__ hides it wherever it goes; a
                # decoder only matters when called (a test's table lists them)
                (name in EXECUTORS or (name in DECODERS and id(node) in self._called))
                and isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Call)
                and not DYNAMIC_IMPORTERS.isdisjoint(self.resolve(node.value.func))
            ):
                # __import__("builtins").exec: no reason to spell it so but to hide it
                self._emit_at(
                    "CPL-THR-003", f"{name.removeprefix('builtins.')} through __import__", node
                )
            if rule_id is not None:
                self._emit_api(rule_id, name, node)
                continue
            # `import urllib; urllib.request.urlopen(...)` imports nothing
            # flagged: report the module at its first use instead.
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                module_rule = MODULE_RULES.get(prefix)
                if module_rule is not None and prefix not in self._flagged_modules:
                    self._flagged_modules.add(prefix)
                    self._emit_module(module_rule, prefix, node)
            if name in ENVIRON_MAPPINGS or name in ENV_FUNCTIONS:
                self._emit_env(node, name, None)
            elif name in OPEN_FUNCTIONS:
                # `reader = open` hides the mode from the call rule: assume a write.
                api = f"{name.removeprefix('builtins.')} (not called directly: mode unknown)"
                self._emit_at("CPL-FS-001", api, node, covered=scan.grants.writes_files)

    def _emit_at(
        self,
        rule_id: str,
        api: str,
        node: ast.AST,
        *,
        covered: bool = False,
        capability: str | None = None,
    ) -> None:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", None)
        self._scan.emit(rule_id, api, line, col, covered=covered, capability=capability)

    def _emit_module(self, rule_id: str, module: str, node: ast.AST) -> None:
        covered = rule_id == "CPL-PROC-002" and self._scan.grants.runs_programs
        self._emit_at(rule_id, module, node, covered=covered)

    def _check_module(self, name: str, node: ast.AST) -> None:
        """Rules about importing ``name`` (an import or a literal dynamic import)."""
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            rule_id = MODULE_RULES.get(prefix)
            if rule_id is not None:
                self._flagged_modules.add(prefix)
                self._emit_module(rule_id, prefix, node)
        top = parts[0]
        local = self._scan.local_modules
        if top and top not in STDLIB and top != "caplet" and top not in local:
            self._emit_at("CPL-SUP-001", top, node)

    def _emit_api(self, rule_id: str, name: str, node: ast.AST, prog: str | None = None) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        if rule_id == "CPL-PROC-001":
            line = getattr(node, "lineno", 0)
            if prog is not None and PurePosixPath(prog).name in SHELLS:
                self._scan.tag(Tag.SHELL, line, prog)
            if prog is not None and launches_payload(prog):
                self._scan.tag(Tag.LAUNCH, line, prog)
            if isinstance(node, ast.Call):
                marker = self._sinks.persistence_marker(node)
                if marker is not None:
                    self._scan.tag(Tag.PERSISTENCE_WRITE, line, marker)
            capability = f"proc.exec:{prog}" if prog else None
            covered = grants.covers_program(prog)
            self._emit_at(rule_id, api, node, covered=covered, capability=capability)
        elif rule_id == "CPL-FS-003":
            self._emit_at(rule_id, api, node, covered=grants.writes_files)
        else:
            self._emit_at(rule_id, api, node)

    def _emit_env(self, node: ast.AST, api: str, key: str | None) -> None:
        """``api`` is how the access reads, with ``{}`` where the name goes."""
        names = self._scan.grants.env_names
        if key is not None and self._sinks.secret_read(key):
            self._scan.tag(Tag.SECRET_ENV, getattr(node, "lineno", 0), key)
            self._scan.secret_names.add(key)
        if key is not None:
            self._emit_at(
                "CPL-ENV-001",
                api.format(repr(key)),
                node,
                covered=key in names,
                capability=f"env.read:{key}",
            )
        else:
            self._emit_at("CPL-ENV-002", api.format("..."), node, covered=bool(names))

    def _emit_open(self, node: ast.Call, name: str, spec: ArgumentSpec) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        arg = argument(node, spec)
        if name == "os.open":
            flags = (
                {n.attr for n in ast.walk(arg) if isinstance(n, ast.Attribute)}
                | {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
                if arg is not None
                else set()
            )
            writes = not OS_OPEN_WRITE_FLAGS.isdisjoint(flags)
        elif arg is None:
            writes = False  # the default mode is "r"
        else:
            mode = fold_str(arg)
            if mode is None:
                api = f"{api} (mode is not a literal)"
            writes = mode is None or any(c in mode for c in "wax+")
        path = argument(node, ArgumentSpec(0, "file"))
        if writes:
            self._emit_at("CPL-FS-001", api, node, covered=grants.writes_files)
            marker = self._sinks.persistence_marker(path) if path is not None else None
            if marker is not None:
                self._scan.tag(Tag.PERSISTENCE_WRITE, getattr(node, "lineno", 0), marker)
            if path is not None:
                self._sinks.opened_for_writing(node, path)
        else:
            self._emit_at("CPL-FS-002", api, node, covered=grants.reads_files)

    def _check_store(self, target: ast.AST, api_node: ast.AST) -> None:
        """Global-mutation rule for an assignment or deletion target."""
        if isinstance(target, ast.Attribute):
            owner = self._mutable_owner(target.value, target.attr)
            if owner is not None:
                self._emit_at("CPL-GLOB-001", f"{owner}.{target.attr} = ...", api_node)
        elif isinstance(target, ast.Subscript):
            for base in self.resolve(target.value):
                if base in MUTABLE_STATE:
                    self._emit_at("CPL-GLOB-001", f"{base}[...] = ...", api_node)
                    return
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_store(element, element)
        elif isinstance(target, ast.Starred):
            self._check_store(target.value, api_node)

    def _mutable_owner(self, node: ast.AST, attr: str | None) -> str | None:
        """The module ``node`` denotes when setting its ``attr`` patches it.

        Builtins, any ``sys.modules[...]`` entry and top-level standard
        library modules (``os.system = f``) count. ``sys`` only for its import
        state: ``sys.argv``/``sys.stdout`` assignments are routine and only
        affect the plugin's own worker. Submodules and classes (``os.path``,
        ``bdb.Breakpoint``) cannot be told apart without importing them, so
        they are left to the later scanner. ``attr`` is ``None`` when unknown.
        """
        if isinstance(node, ast.Subscript) and "sys.modules" in self.resolve(node.value):
            return "sys.modules[...]"
        for base in self.resolve(node):
            if base == "sys":
                if attr is None or f"sys.{attr}" in IMPORT_STATE:
                    return base
            elif base == "builtins" or ("." not in base and base in STDLIB):
                return base
        return None
