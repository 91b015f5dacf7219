"""The static scanner: AST rules over a plugin tree, without running any of it.

Each ``*.py`` file is decoded, parsed with :func:`ast.parse` and visited
once; nothing is imported or executed (design.md section 4, layer 2). The
rules themselves are data in :mod:`caplet._scan._rules`; this module only
knows how to *find* the spellings listed there:

* one iterative walk measures nesting depth and node count (so that a
  pathological file becomes a finding, never a ``RecursionError``), lists
  the nodes and collects what every name may refer to (imports, simple
  assignments);
* an :class:`ast.NodeVisitor` then visits that node list (no second walk,
  no recursion), resolving every name, attribute and call target to fully
  qualified dotted names (``sp.Popen`` -> ``subprocess.Popen``,
  ``getattr(os, "sys" + "tem")`` -> ``os.system``) and looking them up in
  the rule tables;
* text rules (very long lines, and encoded blobs when the file does not
  parse) run on the decoded text.

Severity is capability-aware: a finding whose behaviour a declared (and
already substituted) capability covers is lowered to the rule's covered
severity and marked ``covered``.
"""

from __future__ import annotations

import ast
import enum
import errno
import io
import os
import stat
import sys
import tokenize
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, assert_never

from caplet._capabilities._model import (
    AppCapability,
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._errors import ScanError
from caplet._findings import Finding
from caplet._scan._model import ScanReport
from caplet._scan._rules import (
    API_RULES,
    BLOB_MIN_DISTINCT,
    BLOB_MIN_LENGTH,
    CHR_FUNCTIONS,
    DYNAMIC_IMPORTERS,
    ENV_FUNCTIONS,
    ENV_METHODS,
    ENVIRON_MAPPINGS,
    FILE_NAME_RULES,
    FILE_SUFFIX_RULES,
    FS_READ_METHODS,
    FS_WRITE_METHODS,
    IMPORT_STATE,
    INTROSPECTION_ATTRIBUTES,
    INTROSPECTION_NAMES,
    LONG_LINE,
    MODULE_RULES,
    MUTATING_METHODS,
    OPEN_FUNCTIONS,
    OS_OPEN_WRITE_FLAGS,
    PROGRAM_ARGUMENTS,
    SENSITIVE_PATH_MARKERS,
    SENSITIVE_PATH_PREFIXES,
    ArgumentSpec,
    rule,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_NODES",
    "scan_source",
    "scan_tree",
]

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_DEPTH = 200
DEFAULT_MAX_NODES = 500_000

#: Directories never descended into: byte-code caches and VCS metadata.
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".bzr"})

#: Bounds on the resolver's own recursion (alias chains, attribute chains,
#: constant folding). Real code never comes near them; crafted code that
#: does simply stops resolving, it cannot exhaust the stack.
_MAX_RESOLVE_DEPTH = 48
#: Distinct meanings kept per name. A name rebound to more modules than this
#: is itself absurd; its import statements are still checked one by one.
_MAX_CANDIDATES = 64

_EXCERPT_LENGTH = 120

#: Containers whose items are interpreter-wide state (imports, builtins).
_MUTABLE_STATE = IMPORT_STATE | {"builtins.__dict__"}

_STDLIB = frozenset(sys.stdlib_module_names)
#: Names a bare reference can be reported for, and the first components of
#: flagged modules: anything else is skipped without splitting it.
_REFERENCE_NAMES = (
    frozenset(API_RULES) | ENVIRON_MAPPINGS | ENV_FUNCTIONS | frozenset(OPEN_FUNCTIONS)
)
_MODULE_ROOTS = frozenset(m.split(".", 1)[0] for m in MODULE_RULES)
_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
_HEX_ALPHABET = frozenset("0123456789abcdefABCDEF")
#: ``bytes.translate`` table turning every non-base64 byte into a space, for
#: the text fallback on unparsable files (linear, no regex backtracking).
_NOT_BASE64 = bytes(c if chr(c) in _BASE64_ALPHABET else 0x20 for c in range(256))


# -- capabilities ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Grants:
    """What the declared capabilities cover, reduced to what the rules ask.

    A templated capability (``fs.read:${config.root}``) covers its *kind*
    (the plugin did declare that it reads files) but no literal path or
    program, because its value is only known once configured; the sandbox
    enforces the substituted value.
    """

    fs_read: tuple[str, ...]
    fs_write: tuple[str, ...]
    env_names: frozenset[str]
    programs: tuple[str, ...]
    templated_kinds: frozenset[CapabilityKind] = frozenset()

    @property
    def writes_files(self) -> bool:
        return bool(self.fs_write) or CapabilityKind.FS_WRITE in self.templated_kinds

    @property
    def reads_files(self) -> bool:
        return (
            self.writes_files
            or bool(self.fs_read)
            or CapabilityKind.FS_READ in self.templated_kinds
        )

    @property
    def runs_programs(self) -> bool:
        return bool(self.programs) or CapabilityKind.PROC_EXEC in self.templated_kinds

    @classmethod
    def of(cls, capabilities: Sequence[Capability]) -> _Grants:
        fs_read: list[str] = []
        fs_write: list[str] = []
        env_names: set[str] = set()
        programs: list[str] = []
        templated: set[CapabilityKind] = set()
        for cap in capabilities:
            if cap.templated:
                templated.add(cap.kind)
                continue
            if isinstance(cap, FsCapability):
                target = fs_write if cap.kind is CapabilityKind.FS_WRITE else fs_read
                target.append(cap.root)
            elif isinstance(cap, EnvReadCapability):
                env_names.add(cap.name)
            elif isinstance(cap, ProcExecCapability):
                programs.append(cap.program)
            elif isinstance(cap, NetHttpCapability | HostCallCapability | AppCapability):
                pass  # brokered by the host: no scanner rule is about them
            else:
                assert_never(cap)
        return cls(
            tuple(fs_read),
            tuple(fs_write),
            frozenset(env_names),
            tuple(programs),
            frozenset(templated),
        )

    def covers_program(self, program: str | None) -> bool:
        """A literal program must be granted by name; an unknown one by any grant."""
        if program is None:
            return self.runs_programs
        name = PurePosixPath(program).name
        return any(
            granted in (program, name) or PurePosixPath(granted).name == program
            for granted in self.programs
        )

    def covers_path(self, literal: str) -> bool:
        """True when some fs capability's path is a prefix of ``literal``."""
        for prefix in (*self.fs_read, *self.fs_write):
            base = prefix.rstrip("/")
            if literal == prefix or literal.startswith(base + "/"):
                return True
        return False


_NO_GRANTS = _Grants((), (), frozenset(), ())


# -- the first pass: limits and bindings --------------------------------------------------


@dataclass(slots=True)
class _Bindings:
    """What each name of a file may refer to, collected before rules run.

    Scopes are deliberately flattened: a name imported in one function and
    used in another still resolves, which errs towards reporting.
    """

    imports: dict[str, list[str]]
    assigned: dict[str, list[ast.expr]]
    defined: set[str]
    star_modules: list[str]


@dataclass(frozen=True, slots=True)
class _Survey:
    """The first pass's result: bindings, and every node parents first."""

    bindings: _Bindings
    nodes: list[ast.AST]


@dataclass(frozen=True, slots=True)
class _TooComplex:
    """Why the first pass gave up, and where."""

    reason: str
    line: int


#: Fields never worth a visit: expression contexts and operators are
#: singletons with no position, read directly by the rules that need them.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}
_BINDING_NODES = (
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def _survey(tree: ast.AST, max_depth: int, max_nodes: int) -> _Survey | _TooComplex:
    """Measure depth and size, collect bindings and list the nodes, in one walk.

    Iterative and level by level (breadth first), so that no nesting can
    exhaust the Python stack and the depth is simply the level count; the
    node list has every parent before its children, which the rule visitor
    relies on. The child loop is ``ast.iter_child_nodes`` inlined with
    per-class field lists: this walk is the scanner's hot path.
    """
    bindings = _Bindings({}, {}, set(), [])
    nodes: list[ast.AST] = []
    level: list[ast.AST] = [tree]
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return _TooComplex(f"nesting deeper than {max_depth} levels", _first_line(level))
        if len(nodes) + len(level) > max_nodes:
            return _TooComplex(f"more than {max_nodes} syntax nodes", _first_line(level))
        nodes.extend(level)
        below: list[ast.AST] = []
        for node in level:
            kind = type(node)
            if kind in _BINDING_NODES:
                _bind(node, bindings)
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = tuple(f for f in kind._fields if f not in _SKIPPED_FIELDS)
                _CHILD_FIELDS[kind] = fields
            for name in fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    below.extend(item for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    below.append(value)
        level = below
    return _Survey(bindings, nodes)


def _first_line(level: list[ast.AST]) -> int:
    """A line number to point at: the first node of ``level`` that has one."""
    return next((n.lineno for n in level if isinstance(n, ast.stmt | ast.expr)), 0)


def _bind(node: ast.AST, b: _Bindings) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                b.imports.setdefault(alias.asname, []).append(alias.name)
            else:
                top = alias.name.split(".", 1)[0]
                b.imports.setdefault(top, []).append(top)
    elif isinstance(node, ast.ImportFrom):
        # A relative import names a module of the plugin itself: the leading
        # dot keeps it from ever matching a rule table entry.
        module = ("." * node.level) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                if node.level == 0 and node.module:
                    b.star_modules.append(node.module)
                continue
            b.imports.setdefault(alias.asname or alias.name, []).append(f"{module}.{alias.name}")
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            _bind_target(target, node.value, b)
    elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
        _bind_target(node.target, node.value, b)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        b.defined.add(node.name)


def _bind_target(target: ast.expr, value: ast.expr, b: _Bindings) -> None:
    if isinstance(target, ast.Name):
        b.assigned.setdefault(target.id, []).append(value)
    elif (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        for t, v in zip(target.elts, value.elts, strict=True):
            if isinstance(t, ast.Name):
                b.assigned.setdefault(t.id, []).append(v)


# -- helpers on nodes ---------------------------------------------------------------------


def _fold_str(node: ast.AST | None, depth: int = 0) -> str | None:
    """The value of a constant string expression, or ``None``.

    Folds what obfuscation uses to hide a name from a plain text search:
    ``"sys" + "tem"``, f-strings without fields, ``"".join(["sy", "stem"])``.
    Bytes are read as Latin-1 so ``os.environb[b"X"]`` folds to ``"X"``.
    """
    if node is None or depth > _MAX_RESOLVE_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _fold_str(node.left, depth + 1)
        right = _fold_str(node.right, depth + 1) if left is not None else None
        return None if right is None or left is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_fold_str(v, depth + 1) for v in node.values]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = _fold_str(node.func.value, depth + 1)
        items = [_fold_str(e, depth + 1) for e in node.args[0].elts]
        if sep is None or any(i is None for i in items):
            return None
        return sep.join(i or "" for i in items)
    return None


def _argument(call: ast.Call, spec: ArgumentSpec) -> ast.expr | None:
    if spec.index < len(call.args) and not any(
        isinstance(a, ast.Starred) for a in call.args[: spec.index + 1]
    ):
        return call.args[spec.index]
    if spec.keyword is not None:
        for kw in call.keywords:
            if kw.arg == spec.keyword:
                return kw.value
    return None


def _program(arg: ast.expr | None) -> str | None:
    """The program a process call runs: a list's first item or a command's first word."""
    if isinstance(arg, ast.List | ast.Tuple):
        arg = arg.elts[0] if arg.elts else None
    text = _fold_str(arg)
    if text is None:
        return None
    words = text.split()
    return words[0] if words else None


def _is_blob(text: str) -> bool:
    """Long base64 or hex text (line breaks and indentation allowed)."""
    if len(text) < BLOB_MIN_LENGTH:
        return False
    joined = "".join(line.strip() for line in text.splitlines())
    if len(joined) < BLOB_MIN_LENGTH:
        return False
    chars = set(joined)
    return len(chars) >= BLOB_MIN_DISTINCT and (chars <= _HEX_ALPHABET or chars <= _BASE64_ALPHABET)


def _sensitive_path(text: str) -> bool:
    if len(text) > 4096:  # a path literal is short; prose and data are not paths
        return False
    if "/" not in text and ".netrc" not in text:  # fast exit: every pattern has one
        return False
    for prefix in SENSITIVE_PATH_PREFIXES:
        if text.startswith(prefix) or (prefix.endswith("/") and text == prefix[:-1]):
            return True
    return any(marker in text for marker in SENSITIVE_PATH_MARKERS)


def _shorten(text: str, limit: int = 60) -> str:
    """A literal, quoted and cut, for a message."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# -- per-file state -------------------------------------------------------------------


class _FileScan:
    """Findings of one file, with the context every rule needs."""

    def __init__(
        self, file: str, text: str, grants: _Grants, local_modules: Collection[str]
    ) -> None:
        self.file = file
        # Python ends lines at \n, \r\n and \r only; str.splitlines() also
        # splits on \f, \x1c, \u2028 ... and would shift every line number.
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.grants = grants
        self.local_modules = local_modules
        self.findings: list[Finding] = []

    def emit(
        self,
        rule_id: str,
        api: str,
        line: int,
        col_offset: int | None,
        *,
        covered: bool = False,
        capability: str | None = None,
    ) -> None:
        """Record one finding; ``col_offset`` is ast's (UTF-8 bytes, 0-based)."""
        r = rule(rule_id)
        if r.covered_by is not None and capability is None:
            capability = r.covered_by.value
        text = r.message.format(api=api)
        if covered and r.covered_severity is not None:
            severity = r.covered_severity
            message = f"{text} (covered by {capability})"
        else:
            covered = False
            severity = r.severity
            message = f"{text}; {r.hint}"
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        column = 0 if col_offset is None else _column(source_line, col_offset)
        excerpt = source_line.strip()
        if len(excerpt) > _EXCERPT_LENGTH:
            excerpt = excerpt[: _EXCERPT_LENGTH - 1] + "…"
        self.findings.append(
            Finding(
                rule_id=rule_id,
                severity=severity,
                message=message,
                file=self.file,
                line=line,
                column=column,
                excerpt=excerpt,
                capability=capability,
                covered=covered,
            )
        )

    def emit_at(
        self,
        rule_id: str,
        api: str,
        node: ast.AST,
        *,
        covered: bool = False,
        capability: str | None = None,
    ) -> None:
        """Record one finding at ``node``'s position."""
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", None)
        self.emit(rule_id, api, line, col, covered=covered, capability=capability)

    # -- text rules --------------------------------------------------------------------

    def long_lines(self) -> None:
        for number, line in enumerate(self.lines, start=1):
            if len(line) > LONG_LINE:
                self.emit("CPL-OBF-003", f"line {number} ({len(line)} characters)", number, 0)

    def blob_runs(self) -> None:
        """Encoded blobs in the raw text, for files whose strings ast cannot give us."""
        for number, line in enumerate(self.lines, start=1):
            if len(line) < BLOB_MIN_LENGTH:
                continue
            # Non-ASCII characters become "?" (not base64), then one C-level
            # translate turns every non-alphabet byte into a separator.
            ascii_line = line.encode("ascii", "replace").translate(_NOT_BASE64)
            for raw in ascii_line.split():
                run = raw.decode("ascii")
                if _is_blob(run):
                    self.emit("CPL-OBF-001", f"text of {len(run)} characters", number, 0)
                    break

    # -- module rules ------------------------------------------------------------------

    def check_module(self, name: str, node: ast.AST, flagged: set[str]) -> None:
        """Rules about importing ``name`` (an import or a literal dynamic import)."""
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            rule_id = MODULE_RULES.get(prefix)
            if rule_id is not None:
                flagged.add(prefix)
                self._emit_module(rule_id, prefix, node)
        top = parts[0]
        if top and top not in _STDLIB and top != "caplet" and top not in self.local_modules:
            self.emit_at("CPL-SUP-001", top, node)

    def _emit_module(self, rule_id: str, module: str, node: ast.AST) -> None:
        covered = rule_id == "CPL-PROC-002" and self.grants.runs_programs
        self.emit_at(rule_id, module, node, covered=covered)


def _column(line: str, col_offset: int) -> int:
    """1-based character column from ast's UTF-8 byte offset."""
    if line.isascii():
        return col_offset + 1
    return len(line.encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1


# -- the second pass: rules -------------------------------------------------------------


class _RuleVisitor(ast.NodeVisitor):
    """Applies the code rules to one parsed file.

    It is an :class:`ast.NodeVisitor` (``visit_<Class>`` methods) that does
    not recurse: :meth:`run` feeds it the first pass's node list, parents
    before children, and ``generic_visit`` does nothing. So the Python stack
    stays flat whatever the nesting and the tree is walked once. Nodes a
    parent has already reported with more context (``subprocess.run`` inside
    a call whose program is known) are recorded in ``_handled`` and skipped.
    """

    def __init__(self, scan: _FileScan, bindings: _Bindings) -> None:
        self._scan = scan
        self._b = bindings
        self._handled: set[int] = set()
        self._memo: dict[int, tuple[str, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._resolving: set[str] = set()
        self._flagged_modules: set[str] = set()

    def run(self, nodes: list[ast.AST]) -> None:
        # NodeVisitor.visit looks the method up by name for every node; a
        # per-class cache skips the string building, and classes without a
        # visit_ method are skipped outright.
        methods: dict[type[ast.AST], Callable[[Any], None] | None] = {}
        for node in nodes:
            kind = type(node)
            try:
                method = methods[kind]
            except KeyError:
                method = getattr(self, f"visit_{kind.__name__}", None)
                methods[kind] = method
            if method is not None:
                method(node)

    def generic_visit(self, node: ast.AST) -> None:
        """Nothing: :meth:`run` already visits every node."""

    # -- resolution -------------------------------------------------------------------

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Fully qualified dotted names ``node`` may denote (empty when unknown)."""
        key = id(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if depth > _MAX_RESOLVE_DEPTH:
            return ()
        result = self._resolve(node, depth)
        self._memo[key] = result
        return result

    def _resolve(self, node: ast.AST, depth: int) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return self._resolve_name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return tuple(f"{base}.{node.attr}" for base in self.resolve(node.value, depth + 1))
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._resolve_call(node, depth)
        return ()

    def _resolve_name(self, name: str, depth: int) -> tuple[str, ...]:
        cached = self._names.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:  # a = b; b = a
            return ()
        self._resolving.add(name)
        found: list[str] = list(self._b.imports.get(name, ()))
        for value in self._b.assigned.get(name, ())[:_MAX_CANDIDATES]:
            found.extend(self.resolve(value, depth + 1))
        if name in INTROSPECTION_NAMES:
            found.append("builtins")
        elif name not in self._b.imports and name not in self._b.defined:
            # Unbound by import or def: it is the builtin (or a star import).
            found.append(f"builtins.{name}")
            found.extend(f"{m}.{name}" for m in self._b.star_modules)
        self._resolving.discard(name)
        result = tuple(dict.fromkeys(found))[:_MAX_CANDIDATES]
        self._names[name] = result
        return result

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> tuple[str, ...]:
        key = _fold_str(node.slice)
        if key is None:
            return ()
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            # builtins.__dict__["eval"] is builtins.eval
            return tuple(f"{b}.{key}" for b in self.resolve(value.value, depth + 1))
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            # vars(builtins)["eval"] likewise
            if "builtins.vars" in self.resolve(value.func, depth + 1):
                return tuple(f"{b}.{key}" for b in self.resolve(value.args[0], depth + 1))
            return ()
        if "sys.modules" in self.resolve(value, depth + 1):
            return (key,)
        return ()

    def _resolve_call(self, node: ast.Call, depth: int) -> tuple[str, ...]:
        funcs = self.resolve(node.func, depth + 1)
        if not funcs or not node.args:
            return ()
        if not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__("os") evaluates to the module os (for a dotted name
            # __import__ returns the top package, import_module the leaf).
            name = _fold_str(node.args[0])
            if name is None:
                return ()
            if "builtins.__import__" in funcs and "fromlist" not in {k.arg for k in node.keywords}:
                return tuple(dict.fromkeys((name, name.split(".", 1)[0])))
            return (name,)
        if "builtins.getattr" in funcs and len(node.args) >= 2:
            attr = _fold_str(node.args[1])
            if attr is None:
                return ()
            return tuple(f"{b}.{attr}" for b in self.resolve(node.args[0], depth + 1))
        return ()

    # -- reporting helpers ------------------------------------------------------------------

    def _report_reference(self, node: ast.AST, candidates: tuple[str, ...]) -> None:
        """API rules for a reference that no enclosing call has reported."""
        for name in candidates:
            if name not in _REFERENCE_NAMES and name.split(".", 1)[0] not in _MODULE_ROOTS:
                continue
            rule_id = API_RULES.get(name)
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
                    self._scan._emit_module(module_rule, prefix, node)
            if name in ENVIRON_MAPPINGS or name in ENV_FUNCTIONS:
                self._emit_env(node, name, None)
            elif name in OPEN_FUNCTIONS:
                # `reader = open` hides the mode from the call rule: assume a write.
                api = f"{name.removeprefix('builtins.')} (not called directly: mode unknown)"
                self._scan.emit_at("CPL-FS-001", api, node, covered=self._scan.grants.writes_files)

    def _emit_api(self, rule_id: str, name: str, node: ast.AST, program: str | None = None) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        if rule_id == "CPL-PROC-001":
            capability = f"proc.exec:{program}" if program else None
            self._scan.emit_at(
                rule_id,
                api,
                node,
                covered=grants.covers_program(program),
                capability=capability,
            )
        elif rule_id == "CPL-FS-003":
            self._scan.emit_at(rule_id, api, node, covered=grants.writes_files)
        else:
            self._scan.emit_at(rule_id, api, node)

    def _emit_env(self, node: ast.AST, api: str, key: str | None) -> None:
        """``api`` is how the access reads, with ``{}`` where the name goes."""
        names = self._scan.grants.env_names
        if key is not None:
            self._scan.emit_at(
                "CPL-ENV-001",
                api.format(repr(key)),
                node,
                covered=key in names,
                capability=f"env.read:{key}",
            )
        else:
            self._scan.emit_at("CPL-ENV-002", api.format("..."), node, covered=bool(names))

    def _emit_open(self, node: ast.Call, name: str, spec: ArgumentSpec) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        arg = _argument(node, spec)
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
            mode = _fold_str(arg)
            if mode is None:
                api = f"{api} (mode is not a literal)"
            writes = mode is None or any(c in mode for c in "wax+")
        if writes:
            self._scan.emit_at("CPL-FS-001", api, node, covered=grants.writes_files)
        else:
            read_ok = grants.reads_files
            self._scan.emit_at("CPL-FS-002", api, node, covered=read_ok)

    def _check_store(self, target: ast.AST, api_node: ast.AST) -> None:
        """Global-mutation rule for an assignment or deletion target."""
        if isinstance(target, ast.Attribute):
            owner = self._mutable_owner(target.value, target.attr)
            if owner is not None:
                self._scan.emit_at("CPL-GLOB-001", f"{owner}.{target.attr} = ...", api_node)
        elif isinstance(target, ast.Subscript):
            for base in self.resolve(target.value):
                if base in _MUTABLE_STATE:
                    self._scan.emit_at("CPL-GLOB-001", f"{base}[...] = ...", api_node)
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
            elif base == "builtins" or ("." not in base and base in _STDLIB):
                return base
        return None

    # -- visitors -------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._scan.check_module(alias.name, alias, self._flagged_modules)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._scan.check_module(node.module, node, self._flagged_modules)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                for i in range(len(node.module.split(".")) + 1, len(full.split(".")) + 1):
                    prefix = ".".join(full.split(".")[:i])
                    module_rule = MODULE_RULES.get(prefix)
                    if module_rule is not None and prefix not in self._flagged_modules:
                        self._flagged_modules.add(prefix)
                        self._scan._emit_module(module_rule, prefix, alias)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in INTROSPECTION_NAMES:
            self._scan.emit_at("CPL-INTRO-001", node.id, node)
        elif isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            # Straight to the per-name cache: Names are the commonest node.
            self._report_reference(node, self._resolve_name(node.id, 0))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRIBUTES:
            self._scan.emit_at("CPL-INTRO-001", node.attr, node)
        if isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            self._report_reference(node, self.resolve(node))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if id(node) not in self._handled:
            for base in self.resolve(node.value):
                if base in ENVIRON_MAPPINGS:
                    self._handled.add(id(node.value))
                    self._emit_env(node, base + "[{}]", _fold_str(node.slice))
                    break
            else:
                if isinstance(node.ctx, ast.Load):
                    self._report_reference(node, self.resolve(node))

    def visit_Compare(self, node: ast.Compare) -> None:
        # "TOKEN" in os.environ
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            container = node.comparators[0]
            for base in self.resolve(container):
                if base in ENVIRON_MAPPINGS:
                    self._handled.add(id(container))
                    self._emit_env(node, "{} in " + base, _fold_str(node.left))
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store(target, target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_store(target, target)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        text: str | None = None
        if isinstance(value, str):
            text = value
        elif isinstance(value, bytes):
            text = value.decode("latin-1")
        if text is not None:
            if _is_blob(text):
                self._scan.emit_at("CPL-OBF-001", f"string of {len(text)} characters", node)
            if _sensitive_path(text):
                self._scan.emit_at(
                    "CPL-FS-004",
                    _shorten(text),
                    node,
                    covered=self._scan.grants.covers_path(text),
                )

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        elt = node.elt
        if isinstance(elt, ast.Call) and not CHR_FUNCTIONS.isdisjoint(self.resolve(elt.func)):
            self._scan.emit_at("CPL-OBF-002", "chr() in a comprehension", node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node)

    def visit_Call(self, node: ast.Call) -> None:
        funcs = self.resolve(node.func)
        self._call_rules(node, funcs)
        if id(node) not in self._handled:
            # getattr(os, "system") and __import__("socket") are references too.
            self._report_reference(node, self.resolve(node))

    def _call_rules(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        scan = self._scan
        func_id = id(node.func)
        for name in funcs:
            if API_RULES.get(name) == "CPL-PROC-001":
                spec = PROGRAM_ARGUMENTS.get(name)
                program = _program(_argument(node, spec)) if spec is not None else None
                self._handled.add(func_id)
                self._emit_api("CPL-PROC-001", name, node, program)
            elif name in OPEN_FUNCTIONS:
                self._handled.add(func_id)
                self._emit_open(node, name, OPEN_FUNCTIONS[name])
            elif name in ENV_FUNCTIONS:
                self._handled.add(func_id)
                key = _argument(node, ArgumentSpec(0, "key"))
                self._emit_env(node, name + "({})", _fold_str(key))
            elif name in DYNAMIC_IMPORTERS and node.args:
                module = _fold_str(node.args[0])
                if module is not None:
                    scan.check_module(module, node, self._flagged_modules)
            elif name in {"builtins.getattr", "builtins.setattr", "builtins.delattr"}:
                self._attribute_call(node, name)
            elif (
                name == "builtins.map"
                and node.args
                and not CHR_FUNCTIONS.isdisjoint(self.resolve(node.args[0]))
            ):
                scan.emit_at("CPL-OBF-002", "map(chr, ...)", node)
        func = node.func
        if not isinstance(func, ast.Attribute) or func_id in self._handled:
            return
        # Methods on receivers the scanner cannot type.
        owners = self.resolve(func.value)
        if func.attr in ENV_METHODS and not ENVIRON_MAPPINGS.isdisjoint(owners):
            self._handled.add(id(func.value))
            key = node.args[0] if node.args else None
            mapping = next(o for o in owners if o in ENVIRON_MAPPINGS)
            self._emit_env(node, f"{mapping}.{func.attr}({{}})", _fold_str(key))
        elif func.attr in MUTATING_METHODS and not _MUTABLE_STATE.isdisjoint(owners):
            state = next(o for o in owners if o in _MUTABLE_STATE)
            scan.emit_at("CPL-GLOB-001", f"{state}.{func.attr}", node)
        elif any(f"{o}.{func.attr}" in API_RULES for o in owners):
            return  # a known API (os.mkdir): the reference rule reports it
        elif func.attr in FS_WRITE_METHODS:
            scan.emit_at("CPL-FS-003", f".{func.attr}()", node, covered=scan.grants.writes_files)
        elif func.attr in FS_READ_METHODS:
            covered = scan.grants.reads_files
            scan.emit_at("CPL-FS-002", f".{func.attr}()", node, covered=covered)

    def _attribute_call(self, node: ast.Call, name: str) -> None:
        """getattr/setattr/delattr with a constant attribute name."""
        if len(node.args) < 2:
            return
        attr = _fold_str(node.args[1])
        if attr is not None and attr in INTROSPECTION_ATTRIBUTES:
            self._scan.emit_at("CPL-INTRO-001", attr, node)
        if name != "builtins.getattr":
            owner = self._mutable_owner(node.args[0], attr)
            if owner is not None:
                verb = name.removeprefix("builtins.")
                self._scan.emit_at("CPL-GLOB-001", f"{verb}({owner}, {attr!r})", node)


# -- single files -------------------------------------------------------------------------


def _scan_text(
    text: str,
    file: str,
    *,
    grants: _Grants,
    local_modules: Collection[str],
    max_depth: int,
    max_nodes: int,
) -> list[Finding]:
    scan = _FileScan(file, text, grants, local_modules)
    scan.long_lines()
    tree: ast.AST | None = None
    try:
        with warnings.catch_warnings():
            # Invalid escapes ("\d") warn while parsing; the scanned file's
            # style is not our concern, and warnings must not escape into the
            # host (tests run with filterwarnings=error).
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=file)
    except SyntaxError as exc:
        line = exc.lineno or _nul_line(text)
        scan.emit("CPL-SCAN-003", f"SyntaxError: {exc.msg}", line, None)
    except UnicodeEncodeError as exc:  # lone surrogates in an in-memory str
        line = text.count("\n", 0, exc.start) + 1
        scan.emit("CPL-SCAN-003", f"UnicodeEncodeError: {exc.reason}", line, None)
    except ValueError as exc:  # NUL bytes on some Python versions
        scan.emit("CPL-SCAN-003", f"ValueError: {exc}", _nul_line(text), None)
    except (RecursionError, MemoryError) as exc:
        scan.emit("CPL-SCAN-002", f"{type(exc).__name__} while parsing", 1, None)
    if tree is None:
        scan.blob_runs()
        return scan.findings
    survey = _survey(tree, max_depth, max_nodes)
    if isinstance(survey, _TooComplex):
        scan.emit("CPL-SCAN-002", survey.reason, survey.line, None)
        scan.blob_runs()
        return scan.findings
    _RuleVisitor(scan, survey.bindings).run(survey.nodes)
    return scan.findings


def _nul_line(text: str) -> int:
    index = text.find("\0")
    return text.count("\n", 0, index) + 1 if index >= 0 else 0


def _finish(findings: list[Finding]) -> list[Finding]:
    """Deduplicate on (rule, file, line, column), keeping the most severe; sort."""
    best: dict[tuple[str, str, int, int], Finding] = {}
    for f in findings:
        key = (f.rule_id, f.file, f.line, f.column)
        kept = best.get(key)
        if kept is None or f.severity.rank < kept.severity.rank:
            best[key] = f
    return sorted(best.values(), key=Finding.sort_key)


def _check_limits(**limits: int) -> None:
    for name, value in limits.items():
        if value < 1:
            raise ScanError(f"scanner limit {name} must be a positive integer, got {value}")


def scan_source(
    source: str,
    filename: str,
    capabilities: Sequence[Capability] = (),
    *,
    local_modules: Collection[str] = (),
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[Finding]:
    """Findings for one in-memory Python file, sorted by :meth:`Finding.sort_key`.

    ``filename`` is used as the findings' ``file``; ``local_modules`` are the
    plugin's own top-level module names (not third-party imports).
    """
    _check_limits(max_depth=max_depth, max_nodes=max_nodes)
    grants = _Grants.of(capabilities)
    return _finish(
        _scan_text(
            source,
            filename,
            grants=grants,
            local_modules=local_modules,
            max_depth=max_depth,
            max_nodes=max_nodes,
        )
    )


# -- trees --------------------------------------------------------------------------------


class _EntryKind(enum.Enum):
    """What the walk found at a path."""

    FILE = "file"
    #: A symlink, FIFO, socket or device: reported, never opened.
    OTHER = "other"
    UNREADABLE_DIR = "unreadable-dir"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One directory entry found by the walk (``relative`` is POSIX, from the root)."""

    path: str
    relative: str
    kind: _EntryKind
    detail: str = ""


def _walk(root: Path) -> Iterator[_Entry]:
    """Every non-directory entry under ``root``, sorted, without following symlinks.

    Iterative (an explicit stack), so a deep directory tree cannot exhaust
    the Python stack.
    """
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if not prefix:
                raise  # the root itself: scan_tree turns this into a ScanError
            yield _Entry(
                directory, prefix.rstrip("/"), _EntryKind.UNREADABLE_DIR, exc.strerror or ""
            )
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            relative = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED_DIRS:
                    subdirs.append((entry.path, relative + "/"))
            elif entry.is_file(follow_symlinks=False):
                yield _Entry(entry.path, relative, _EntryKind.FILE)
            else:
                yield _Entry(entry.path, relative, _EntryKind.OTHER)
        stack.extend(reversed(subdirs))


def _read_source(path: str, max_bytes: int) -> bytes | int | OSError:
    """The file's bytes, its size when over ``max_bytes``, or the error.

    Opened with O_NOFOLLOW and O_NONBLOCK and checked with fstat, so a file
    swapped for a symlink or a FIFO after the walk is neither followed nor
    waited on (open(2)).
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return exc
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return OSError(0, "not a regular file")
            if info.st_size > max_bytes:
                return info.st_size
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            return exc
    return len(data) if len(data) > max_bytes else data


def _decode(data: bytes) -> tuple[str, str | None, int]:
    """Decoded text (lossy on error), the decoding problem if any, and its line.

    The encoding comes from the PEP 263 cookie or BOM, as for an import.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return data.decode("utf-8", "replace"), f"SyntaxError: {exc}", 1
    try:
        return data.decode(encoding), None, 0
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        reason = f"UnicodeDecodeError: byte {data[exc.start]:#04x} is not valid {encoding}"
        return data.decode(encoding, "replace"), reason, line
    except LookupError as exc:  # a cookie naming no codec detect_encoding knows of
        return data.decode("utf-8", "replace"), f"LookupError: {exc}", 1


def _file_name_findings(relative: str) -> list[Finding]:
    """Rules about a file's name alone: install hooks, native code, bytecode.

    None of them can be covered by a capability, so no grants are needed.
    """
    name = relative.rsplit("/", 1)[-1]
    rule_ids = [FILE_NAME_RULES.get(name)]
    rule_ids.extend(r for suffix, r in FILE_SUFFIX_RULES.items() if name.endswith(suffix))
    return [f for r in rule_ids if r is not None for f in _file_finding(relative, r, relative)]


def scan_tree(
    root: Path,
    capabilities: Sequence[Capability] = (),
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> ScanReport:
    """Scan every ``*.py`` file under ``root`` (a directory, or one file).

    All file names are checked for native libraries, bytecode and install
    hooks; ``__pycache__`` and VCS folders are skipped; symlinks and special
    files are reported, never followed. Limits turn pathological files into
    WARNING findings instead of hangs or crashes. Raises :class:`ScanError`
    only when ``root`` itself cannot be scanned.
    """
    _check_limits(max_file_bytes=max_file_bytes, max_depth=max_depth, max_nodes=max_nodes)
    try:
        root_is_dir = root.is_dir()
        root_is_file = not root_is_dir and root.is_file()
    except OSError as exc:
        raise ScanError(f"cannot scan {root}: {exc.strerror}; check the path") from exc
    if root_is_dir:
        try:
            entries = list(_walk(root))
        except OSError as exc:
            raise ScanError(
                f"cannot scan {root}: {exc.strerror}; make the directory readable"
            ) from exc
    elif root_is_file:
        entries = [_Entry(os.fspath(root), root.name, _EntryKind.FILE)]
    else:
        raise ScanError(
            f"cannot scan {root}: no such file or directory; "
            "pass a plugin directory or a Python file"
        )
    local_modules = frozenset(
        e.relative.split("/", 1)[0].removesuffix(".py")
        for e in entries
        if "/" in e.relative or e.relative.endswith(".py")
    )
    grants = _Grants.of(capabilities)
    limits = _Limits(max_file_bytes, max_depth, max_nodes)
    findings: list[Finding] = []
    files_scanned = 0
    bytes_scanned = 0
    for entry in entries:
        kind = entry.kind
        if kind is _EntryKind.UNREADABLE_DIR:
            findings.extend(
                _file_finding(entry.relative, "CPL-SCAN-004", f"directory: {entry.detail}")
            )
        elif kind is _EntryKind.OTHER:
            findings.extend(_file_name_findings(entry.relative))
            findings.extend(_file_finding(entry.relative, "CPL-SCAN-005", entry.relative))
        elif kind is _EntryKind.FILE:
            findings.extend(_file_name_findings(entry.relative))
            if entry.relative.endswith(".py"):
                file_findings, size = _scan_file(entry, grants, local_modules, limits)
                findings.extend(file_findings)
                if size is not None:
                    files_scanned += 1
                    bytes_scanned += size
        else:
            assert_never(kind)
    return ScanReport(
        root=root.as_posix(),
        findings=tuple(_finish(findings)),
        files_scanned=files_scanned,
        bytes_scanned=bytes_scanned,
    )


@dataclass(frozen=True, slots=True)
class _Limits:
    max_file_bytes: int
    max_depth: int
    max_nodes: int


def _file_finding(relative: str, rule_id: str, api: str) -> list[Finding]:
    """A finding about a whole file (no line): unreadable, too large, not regular."""
    scan = _FileScan(relative, "", _NO_GRANTS, ())
    scan.emit(rule_id, api, 0, None)
    return scan.findings


def _scan_file(
    entry: _Entry, grants: _Grants, local_modules: Collection[str], limits: _Limits
) -> tuple[list[Finding], int | None]:
    """Findings of one ``.py`` file, and its size when it was read (``None`` if not)."""
    data = _read_source(entry.path, limits.max_file_bytes)
    if isinstance(data, OSError):
        if data.errno in {0, errno.ELOOP}:  # swapped for a link or FIFO since the walk
            return _file_finding(entry.relative, "CPL-SCAN-005", entry.relative), None
        reason = data.strerror or type(data).__name__
        return _file_finding(entry.relative, "CPL-SCAN-004", reason), None
    if isinstance(data, int):
        api = f"{data} bytes, limit {limits.max_file_bytes}"
        return _file_finding(entry.relative, "CPL-SCAN-001", api), None
    text, problem, line = _decode(data)
    if problem is None:
        findings = _scan_text(
            text,
            entry.relative,
            grants=grants,
            local_modules=local_modules,
            max_depth=limits.max_depth,
            max_nodes=limits.max_nodes,
        )
        return findings, len(data)
    # Undecodable: no AST, but the text rules still look at what there is.
    scan = _FileScan(entry.relative, text, grants, local_modules)
    scan.emit("CPL-SCAN-003", problem, line, None)
    scan.long_lines()
    scan.blob_runs()
    return scan.findings, len(data)
