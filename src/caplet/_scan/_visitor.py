"""The AST rules: one visit of a parsed file, resolving every name and looking it up.

:class:`RuleVisitor` is an :class:`ast.NodeVisitor` (``visit_<Class>``
methods) that does not recurse: :meth:`RuleVisitor.run` feeds it the
survey's node list, parents before children, so the Python stack stays flat
whatever the nesting and the tree is walked once. Names, attributes and
call targets are resolved by :class:`caplet._scan._flow.Flow` to fully
qualified names and looked up in the rule tables of
:mod:`caplet._scan._rules` (capabilities: processes, files, environment,
modules, introspection, global mutation). Calls that can be a *sink* of a
threat are handed to :class:`caplet._scan._sinks.Sinks`, which checks what
data reaches them once the whole file is visited. Nodes a parent has
already reported with more context (``subprocess.run`` inside a call whose
program is known) are recorded in ``_handled`` and skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import re2

from caplet._scan._annotation_text import annotation_routes
from caplet._scan._commands import new_argv
from caplet._scan._correlate import Tag
from caplet._scan._deferred_calls import deferred_calls
from caplet._scan._filescan import FileScan, entropy, entropy_bits, is_blob, sensitive_path
from caplet._scan._flow import Flow
from caplet._scan._model import ScanMode
from caplet._scan._rules import (
    API_RULES,
    CHR_FUNCTIONS,
    DYNAMIC_IMPORTERS,
    ENV_FUNCTIONS,
    ENV_METHODS,
    ENVIRON_MAPPINGS,
    FS_READ_METHODS,
    FS_WRITE_METHODS,
    INTROSPECTION_ATTRIBUTES,
    INTROSPECTION_NAMES,
    MODULE_RULES,
    MUTATING_METHODS,
    OPEN_FUNCTIONS,
    PROGRAM_ARGUMENTS,
    ArgumentSpec,
)
from caplet._scan._sinks import Sinks
from caplet._scan._syntax import Bindings, argument, fold_str, program, shorten, url_host
from caplet._scan._syntax import dotted as _dotted
from caplet._scan._text_routes import (
    ROUTE_CALLS,
    ROUTE_METHODS,
    annotation_stores,
    call_routes,
    reduce_routes,
)
from caplet._scan._visitor_patches import HOOK_ADDERS, Patching
from caplet._scan._visitor_report import MUTABLE_STATE, reportable

__all__ = ["RuleVisitor"]

#: Mitigations (plugin mode) by a bare attribute name.
_MITIGATION_ATTRIBUTES = {
    "is_symlink": "CPL-MIT-001",
    "resolve": "CPL-MIT-001",
    "realpath": "CPL-MIT-001",
    "O_NOFOLLOW": "CPL-MIT-001",
    "is_relative_to": "CPL-MIT-002",
    "commonpath": "CPL-MIT-002",
    "st_size": "CPL-MIT-003",
    "getsize": "CPL-MIT-003",
}
#: Strings this long or longer get an entropy check (CPL-OBF-004).
_ENTROPY_MIN_LENGTH = 64
_URL_PREFIXES = ("http://", "https://")
#: An absolute path literal under a real top-level directory (``/srv/data/in.csv``),
#: for CPL-FS-005. Anchoring on the roots keeps URL paths (``"/v1/items"``) out;
#: /tmp is left out because every worker has a private one.
_ABSOLUTE_PATH = re2.compile(
    r"/(?:etc|var|usr|home|root|srv|opt|mnt|media|data|proc|sys|dev|run|boot|lib|lib64|bin"
    r"|sbin|Users|Library|Volumes|private|Applications)(?:/[A-Za-z0-9._+@-]+)*/?"
)
#: Base classes of setuptools/distutils commands (a subclass in setup.py runs at install).
#: build_ext and build_py subclasses compile and copy: routine; install,
#: develop and egg_info subclasses run on the user's machine at install.
_INSTALL_COMMANDS = tuple(
    f"{root}.command.{name}"
    for root in ("setuptools", "distutils")
    for name in ("install", "develop", "egg_info", "bdist_egg")
)
#: Classes a subclass walk looks for: each leads to os, subprocess or builtins.
_ESCAPE_CLASSES = frozenset(
    {"_wrap_close", "Popen", "catch_warnings", "BuiltinImporter", "_IterationGuard", "_Printer"}
)
#: ``os.environ`` methods that walk the whole environment.
#: (``copy()`` is left out: it is how code hands the environment to a subprocess.)
_ENV_ITERATORS = frozenset({"items", "values", "keys"})
#: Methods through which a value enters a container or file bound to a name.
_FILLING_METHODS = frozenset(
    {
        "append",
        "extend",
        "update",
        "add",
        "insert",
        "setdefault",
        "write",
        "writelines",
        "set_content",
        "attach",
        "add_attachment",
        "put",
    }
)


#: Lookups and imports by a name :meth:`RuleVisitor._call_rules` checks.
_LOOKUPS = DYNAMIC_IMPORTERS | {
    "builtins.getattr",
    "builtins.setattr",
    "builtins.delattr",
    "inspect.getattr_static",  # getattr by another name (blind16)
}
#: The names the loop of ``RuleVisitor._call_rules`` does something for (most calls'
#: names are none of them, and skip it).
_CALL_RULE_NAMES = frozenset(
    {name for name, rule in API_RULES.items() if rule == "CPL-PROC-001"}
    | set(OPEN_FUNCTIONS)
    | ENV_FUNCTIONS
    | _LOOKUPS
    | {"builtins.map"}
)

#: Hand-overs checked inside one another at most (``map(partial(f, x), ...)``).
_MAX_HANDOVERS = 3

#: Nodes that can add to a name after its binding (see ``RuleVisitor._contribute``).
_CONTRIBUTING = frozenset({ast.Assign, ast.AugAssign, ast.Call})

#: A visitor method not looked up yet.
_UNKNOWN: Any = object()
#: By visitor class, by node class: its ``visit_`` function, or ``None``.
_METHODS: dict[type, dict[type, Callable[[Any, Any], None] | None]] = {}


def _methods(visitor: type) -> dict[type, Callable[[Any, Any], None] | None]:
    """The table of ``visitor``'s ``visit_`` functions (filled by :func:`_method`)."""
    table = _METHODS.get(visitor)
    if table is None:
        table = _METHODS[visitor] = {}
    return table


def _method(
    table: dict[type, Callable[[Any, Any], None] | None], visitor: type, kind: type
) -> Callable[[Any, Any], None] | None:
    """``visitor.visit_<kind>`` (a plain function), remembered in ``table``."""
    method = table[kind] = getattr(visitor, f"visit_{kind.__name__}", None)
    return method


class RuleVisitor(Patching, ast.NodeVisitor):
    """Applies the code rules to one parsed file (see the module docstring)."""

    def __init__(
        self,
        scan: FileScan,
        bindings: Bindings,
        nodes: list[ast.AST],
        scopes: list[int],
        visited: AbstractSet[int] | None = None,
    ) -> None:
        self._scan = scan
        self._b = bindings
        self._nodes = nodes
        self._scopes = scopes
        #: The ids of the nodes the rules visit (``None``: all); the others only
        #: feed the data flow what they add to a name (:meth:`_contributions_only`).
        self._visited = visited
        self._scope = 0
        self.flow = Flow(bindings, nodes, scopes)
        self._sinks = Sinks(scan, self.flow)
        self._handled: set[int] = set()
        #: Nodes that are the callee of a call (visited before them: parents come first).
        self._called: set[int] = set()
        self._flagged_modules: set[str] = set()
        #: Bare names whose resolution no rule reports (see :meth:`visit_Name`).
        self._quiet_names: set[str] = set()
        #: Hand-overs being checked as the calls they make, nested (``g = partial(g)``).
        self._handing_over = 0
        #: Plugin mode: code run by the standard library's other routes is danger (attack26).
        self._routes = scan.mode is ScanMode.PLUGIN

    def run(self) -> None:
        # NodeVisitor.visit looks the method up by name for every node; a
        # per-class table (kept for the visitor class) skips the string building,
        # and classes without a visit_ method are skipped outright. The scope is
        # set only for the nodes something is done for: only they read it.
        methods = _methods(type(self))
        visited = self._visited
        pairs = zip(self._nodes, self._scopes, strict=True)
        if visited is None:
            for node, scope in pairs:
                method = methods.get(type(node), _UNKNOWN)
                if method is _UNKNOWN:
                    method = _method(methods, type(self), type(node))
                if method is not None:
                    self._scope = scope
                    method(self, node)
        else:
            for node, scope in pairs:
                kind = type(node)
                if id(node) not in visited:
                    if isinstance(node, ast.Call) and self._sink_call(node):
                        # a sink outside the focus (attack6): the statement holding
                        # ``requests.get(u, params=data)`` or ``co(code)`` (``from
                        # subprocess import check_output as co``) has no token the
                        # prefilter locates, and the source it is reached by is
                        # bound far from it
                        self._scope = scope
                        self.visit_Call(node)
                        continue
                    if kind in _CONTRIBUTING:
                        self._scope = scope
                        self._contributions_only(node)
                    continue
                method = methods.get(kind, _UNKNOWN)
                if method is _UNKNOWN:
                    method = _method(methods, type(self), kind)
                if method is not None:
                    self._scope = scope
                    method(self, node)
        for at, api in annotation_routes(self.flow, self._nodes) if self._routes else ():
            self._emit_at("CPL-DYN-001", api, at)
        self._sinks.finish()

    def generic_visit(self, node: ast.AST) -> None:
        """Nothing: :meth:`run` already visits every node."""

    def _sink_call(self, node: ast.Call) -> bool:
        """Whether a call outside the focus is one a threat rule checks: a network
        call, exec and its kin, a process, a file started, a pickle loaded, a lookup
        or import by name (what :meth:`visit_Call` hands the sinks), however the code
        spells its callee. Resolving every call outside the focus costs a few
        percent of the rules' time on the stdlib; visiting every node of a focused
        file instead cost a quarter more (issue 16, benchmarks/scan_split.py)."""
        funcs = self.resolve(node.func)
        if self._sink_funcs(funcs):
            return True
        # atexit.register(os.system, cmd): a sink handed over, called by the library
        return any(self._sink_funcs(self.resolve(c.func)) for c in self._handed_over(node, funcs))

    def _sink_funcs(self, funcs: tuple[str, ...]) -> bool:
        return bool(funcs) and (
            self._sinks.named(funcs)
            or not _LOOKUPS.isdisjoint(funcs)
            or any(API_RULES.get(f) == "CPL-PROC-001" for f in funcs)
        )

    def _handed_over(self, node: ast.Call, funcs: tuple[str, ...]) -> list[ast.Call]:
        """The calls ``node`` has the standard library make (:mod:`._deferred_calls`)."""
        return deferred_calls(node, funcs, lambda n: self._b.assigned.get(n, ()), self.resolve)

    def _contributions_only(self, node: ast.AST) -> None:
        """What a node outside the focus adds to a name, as its visit would note it.

        The focus pass (package mode, a large file) runs the rules only on the
        statements around the prefilter's hits, but a sink there may be reached by
        data stored anywhere in the file (``d[k] = v``, ``buf ^= k``,
        ``out.append(v)``), as the whole-file pass sees it (issue 16).
        """
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript | ast.Attribute):
                    self._contribute(target, node.value)
        elif isinstance(node, ast.AugAssign):
            self._contribute_aug(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _FILLING_METHODS
        ):
            for arg in node.args:
                self._contribute(node.func.value, arg)
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and "shutil.copyfileobj" in self.resolve(node.func)
        ):
            self._contribute(node.args[1], node.args[0])

    def _contribute(self, target: ast.AST, value: ast.expr) -> None:
        """``d[k] = v`` / ``d += v``: ``d`` now carries ``v`` too; ``o.x = v``: ``o.x`` does.

        An attribute is its own name (``self.env``), so that one attribute
        set on ``self`` does not taint every other one.
        """
        while isinstance(target, ast.Subscript):
            target = target.value
        key = _dotted(target)
        if key is not None:
            self.flow.note_contribution(key, value, self._scope)

    # -- visitors -------------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for made, api in reduce_routes(node, self.flow) if self._routes else ():
            self._emit_at("CPL-DYN-001", api, made)
        # setup.py's custom install/develop command: code that runs at install
        if self._scan.installer:
            for base in node.bases:
                if any(
                    b in _INSTALL_COMMANDS
                    or b.startswith(tuple(c + "." for c in _INSTALL_COMMANDS))
                    for b in self.resolve(base)
                ):
                    self._scan.tag(Tag.CUSTOM_INSTALL, node.lineno, f"class {node.name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, alias)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._check_module(node.module, node)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                for i in range(len(node.module.split(".")) + 1, len(full.split(".")) + 1):
                    prefix = ".".join(full.split(".")[:i])
                    module_rule = MODULE_RULES.get(prefix)
                    if module_rule is not None and prefix not in self._flagged_modules:
                        self._flagged_modules.add(prefix)
                        self._emit_module(module_rule, prefix, alias)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in self._quiet_names:
            return
        if name in INTROSPECTION_NAMES:
            self._emit_at("CPL-INTRO-001", name, node)
        elif isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            # Straight to the per-name cache: Names are the commonest node.
            candidates = self.flow.resolve_name(name)
            if reportable(candidates):
                self._report_reference(node, candidates)
            else:
                # What a bare name denotes is settled by its first resolution outside
                # any other (resolve_name's memo): a name no rule reports is skipped at
                # its next uses (issue 16's speed)
                self._quiet_names.add(name)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRIBUTES:
            self._emit_at("CPL-INTRO-001", node.attr, node)
            self._escape_walk(node)
        mitigation = _MITIGATION_ATTRIBUTES.get(node.attr)
        if mitigation is not None:
            self._scan.mitigation(mitigation, f".{node.attr}", node.lineno, node.col_offset)
        if isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            self._report_reference(node, self.flow.resolve(node))

    def _escape_walk(self, node: ast.Attribute) -> None:
        """``object.__subclasses__()`` and ``f.__init__.__globals__``: the escape's two halves."""
        if node.attr == "__globals__":
            self._scan.tag(Tag.ESCAPE_TARGET, node.lineno, "__globals__")
        elif node.attr == "__subclasses__":
            receiver = node.value
            while isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            if "builtins.object" in self.resolve(receiver) or (
                isinstance(receiver, ast.Attribute)
                and receiver.attr in {"__base__", "__bases__", "__mro__"}
            ):
                self._scan.tag(Tag.SUBCLASS_WALK, node.lineno, "__subclasses__()")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        # A lookup by a computed key is a threat whatever the call through it reported
        # (ns["Po" + "pen"](...) is handled as subprocess.Popen by visit_Call).
        self._sinks.namespace_lookup(node)
        if id(node) in self._handled:
            return
        for base in self.resolve(node.value):
            if base in ENVIRON_MAPPINGS:
                self._handled.add(id(node.value))
                self._emit_env(node, base + "[{}]", self.flow.name_value(node.slice))
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
                    self._emit_env(node, "{} in " + base, fold_str(node.left))
                    break

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        # for k in os.environ: the environment walked key by key
        if not ENVIRON_MAPPINGS.isdisjoint(self.resolve(node.iter)):
            self._scan.tag(Tag.ENV_ITER, node.lineno, "for ... in os.environ")

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self.visit_For(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Div):
            self._sinks.path_chain(node.value)  # a pathlib path bound to a name (mend19)
        for target in node.targets:
            self._check_store(target, target)
            stored = annotation_stores(target, node.value, self.flow) if self._routes else None
            if stored is not None:
                self._emit_at("CPL-DYN-001", stored, target)
            if isinstance(target, ast.Attribute):
                self._patch(target.value, node.value, target.attr, node)
            if isinstance(target, ast.Subscript | ast.Attribute):
                self._contribute(target, node.value)
            if isinstance(target, ast.Subscript):
                self._sinks.namespace_store(target, node.value)
                self._patch_in_namespace(target, node.value, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node.target)
        self._contribute_aug(node)

    def _contribute_aug(self, node: ast.AugAssign) -> None:
        """``d += v``: ``d`` now carries ``v``."""
        value = node.value
        if isinstance(node.op, ast.BitXor):
            # buf[i] ^= key[i % n]: the buffer is XOR-decoded in place
            value = ast.copy_location(ast.BinOp(node.value, ast.BitXor(), node.value), node.value)
        self._contribute(node.target, value)

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
        if text is None:
            return
        scan = self._scan
        # Every string, not only in files whose text matched: implicitly
        # concatenated literals and escapes hide a marker from the text.
        if len(text) >= 5:
            scan.strings.append((text, getattr(node, "lineno", 0), node.col_offset))
        if text in _ESCAPE_CLASSES:
            scan.tag(Tag.ESCAPE_TARGET, node.lineno, repr(text))
        blob = is_blob(text)
        if len(text) >= _ENTROPY_MIN_LENGTH and not blob and entropy(text) > entropy_bits():
            self._emit_at("CPL-OBF-004", f"string of {len(text)} characters", node)
        if scan.mode is ScanMode.PLUGIN and text[:8].lower().startswith(_URL_PREFIXES):
            host = url_host(text)
            if host:
                self._emit_at(
                    "CPL-NET-003",
                    shorten(text),
                    node,
                    covered=scan.grants.covers_host(host),
                    capability=f"net.http:{text.split(':', 1)[0].lower()}://{host}",
                )
        if blob:
            self._emit_at("CPL-OBF-001", f"string of {len(text)} characters", node)
        if sensitive_path(text):
            self._emit_at("CPL-FS-004", shorten(text), node, covered=scan.grants.covers_path(text))
        elif scan.mode is ScanMode.PLUGIN and _ABSOLUTE_PATH.fullmatch(text):
            self._emit_at("CPL-FS-005", shorten(text), node, covered=scan.grants.covers_path(text))

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        elt = node.elt
        if isinstance(elt, ast.Call) and not CHR_FUNCTIONS.isdisjoint(self.resolve(elt.func)):
            self._emit_at("CPL-OBF-002", "chr() in a comprehension", node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._called.add(id(node.func))
        resolve = self.flow.resolve
        funcs = resolve(node.func)
        self._call_rules(node, funcs)
        self._sinks.call(node, funcs)
        if self._routes and (
            not ROUTE_CALLS.isdisjoint(funcs)
            or (isinstance(node.func, ast.Attribute) and node.func.attr in ROUTE_METHODS)
        ):
            for rule_id, api in call_routes(node, funcs, self.flow):
                self._emit_at(rule_id, api, node)
        if id(node) not in self._handled:
            # getattr(os, "system") and __import__("socket") are references too.
            self._report_reference(node, resolve(node))
        if self._handing_over < _MAX_HANDOVERS:
            # atexit.register(os.system, cmd), Thread(target=exec, args=(code,)), a
            # partial called: checked as the call the library makes (branch blind13)
            for made in self._handed_over(node, funcs):
                if self._sink_call(made):
                    self._sinks.keep(made)
                    self.flow.adopt(made, node)
                    self._handing_over += 1
                    try:
                        self.visit_Call(made)
                    finally:
                        self._handing_over -= 1

    def _call_rules(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        scan = self._scan
        func_id = id(node.func)
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _FILLING_METHODS and node.args:
                for arg in node.args:
                    self._contribute(func.value, arg)
            if func.attr in _ENV_ITERATORS and not ENVIRON_MAPPINGS.isdisjoint(
                self.resolve(func.value)
            ):
                scan.tag(Tag.ENV_ITER, node.lineno, f"os.environ.{func.attr}()")
        if isinstance(func, ast.Attribute) and func.attr in HOOK_ADDERS and node.args:
            self._import_hook(node, func)
        if "shutil.copyfileobj" in funcs and len(node.args) >= 2:
            # copyfileobj(response, f) is f.write(response.read()) (blind13)
            self._contribute(node.args[1], node.args[0])
        for name in funcs if not _CALL_RULE_NAMES.isdisjoint(funcs) else ():
            if API_RULES.get(name) == "CPL-PROC-001":
                spec = PROGRAM_ARGUMENTS.get(name)
                command = argument(node, spec) if spec is not None else None
                self._handled.add(func_id)
                self._emit_api("CPL-PROC-001", name, node, program(command))
                if command is not None:
                    self._sinks.process(node, name, new_argv(node, name) or command)
            elif name in OPEN_FUNCTIONS:
                self._handled.add(func_id)
                self._emit_open(node, name, OPEN_FUNCTIONS[name])
            elif name in ENV_FUNCTIONS:
                self._handled.add(func_id)
                key = argument(node, ArgumentSpec(0, "key"))
                self._emit_env(node, name + "({})", fold_str(key))
            elif name in DYNAMIC_IMPORTERS and node.args:
                module = self.flow.name_value(node.args[0])
                if module is not None:
                    self._check_module(module, node)
                    self._sinks.computed_import(node, name, module)
            elif name in {"builtins.getattr", "builtins.setattr", "builtins.delattr"}:
                self._attribute_call(node, name)
            elif name == "inspect.getattr_static" and len(node.args) >= 2:
                attr = self.flow.name_value(node.args[1])
                self._sinks.computed_getattr(node, node.args[0], node.args[1], attr)
            elif (
                name == "builtins.map"
                and node.args
                and not CHR_FUNCTIONS.isdisjoint(self.resolve(node.args[0]))
            ):
                self._emit_at("CPL-OBF-002", "map(chr, ...)", node)
        if not isinstance(func, ast.Attribute) or func_id in self._handled:
            return
        # Methods on receivers the scanner cannot type.
        owners = self.resolve(func.value)
        if func.attr in ENV_METHODS and not ENVIRON_MAPPINGS.isdisjoint(owners):
            self._handled.add(id(func.value))
            key = node.args[0] if node.args else None
            mapping = next(o for o in owners if o in ENVIRON_MAPPINGS)
            self._emit_env(node, f"{mapping}.{func.attr}({{}})", fold_str(key))
        elif func.attr in MUTATING_METHODS and not MUTABLE_STATE.isdisjoint(owners):
            state = next(o for o in owners if o in MUTABLE_STATE)
            self._emit_at("CPL-GLOB-001", f"{state}.{func.attr}", node)
        elif any(f"{o}.{func.attr}" in API_RULES for o in owners):
            return  # a known API (os.mkdir): the reference rule reports it
        elif func.attr in FS_WRITE_METHODS:
            self._emit_at("CPL-FS-003", f".{func.attr}()", node, covered=scan.grants.writes_files)
        elif func.attr in FS_READ_METHODS:
            self._emit_at("CPL-FS-002", f".{func.attr}()", node, covered=scan.grants.reads_files)
        elif func.attr == "open" and not any(o in OPEN_FUNCTIONS for o in self.resolve(func)):
            # Path(...).open("w"): pathlib takes the mode first. Only a literal
            # write mode counts; reads are everywhere and not worth a finding.
            mode = fold_str(argument(node, ArgumentSpec(0, "mode")))
            if mode is not None and any(c in mode for c in "wax+"):
                self._emit_at("CPL-FS-001", ".open(...)", node, covered=scan.grants.writes_files)
                # its handle carries what is written, as open()'s does (blind14: a line
                # appended to ~/.zshrc through Path.open("a"))
                self._sinks.opened_for_writing(node, func.value)
