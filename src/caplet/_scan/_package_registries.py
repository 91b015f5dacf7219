"""Containers of code sinks filled in one module of a package and called in another (recall14).

Each file's pass sees one file: ``registry.py`` fills ``HANDLERS["run"] = exec`` and
calls nothing, ``__init__.py`` does ``from .registry import HANDLERS`` then
``HANDLERS["run"](b64decode(...))`` and runs a name it cannot resolve. The collector
hands every source's text here as it reads it (:meth:`SinkRegistries.note`), and the
two halves are joined once the whole package has been seen
(:meth:`SinkRegistries.findings`), as :class:`caplet._scan._shell_scripts.InstalledCommands`
joins installed scripts:

* a module whose text passes a code sink as a value (``= exec``, ``, os.system)``) is
  parsed, and each of its module-level containers (a literal bound to a name, or a name
  the module stores into) that holds one (:meth:`caplet._scan._flow.Flow.any_element`)
  is a registry of sinks;
* a module whose text imports a name and calls an element of it (``NAME[...](``,
  ``NAME.get(...)(``, ``NAME.pop(...)(``) is kept, and parsed at the end only when one
  of those names is a registry of the module it is imported from.

A call out of a registry on decoded, downloaded or a remote peer's data is then that
sink's rule (CPL-THR-001, -002, -020), as in one file. The text tests are one RE2 search
and a few substring searches that almost every file fails (1.5 ms a megabyte of the
standard library); a module is parsed here only when the other half exists, and then
bounded as any file is.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2

from caplet._findings import Finding
from caplet._marks import parse
from caplet._scan._filescan import FileScan
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._scan._prefilter_sets import utf8
from caplet._scan._rules import API_RULES
from caplet._scan._sources import EXECUTORS, Source

if TYPE_CHECKING:
    # the AST pass's modules are imported where a file needs them (issue 16's start-up:
    # a scan the prefilter decides whole never loads them, tests/_cli/test_app_startup.py)
    from caplet._scan._flow import Flow

__all__ = ["SinkRegistries"]

#: A code sink written as a value: assigned, stored, passed or listed (not called).
_FILLS = re2.compile(
    r"[=,(\[:{]\s*(?:exec|eval|compile|execfile|os\s*\.\s*(?:system|popen|exec\w*|spawn\w*)|"
    r"subprocess\s*\.\s*(?:Popen|run|call|check_call|check_output|getoutput|getstatusoutput))"
    r"\s*[,)\]}\n]"
)
#: An element of a name called: ``NAME[...](``, ``NAME.get(...)(``, ``NAME.pop(...)(``,
#: matched on the lines that hold ``](`` or ``)(`` only.
_CALLED_ELEMENT = re.compile(
    r"\b([A-Za-z_][\w.]*)\s*(?:\[[^\]\n]*\]|\.(?:get|pop)\([^()\n]*\))\s*\("
)
#: At most this many ``](``/``)(`` lines of a file are read for called elements.
_MAX_CALL_LINES = 256
#: A ``from ... import`` up to the names it binds (:func:`_from_imports` reads them).
_FROM_IMPORT = re.compile(r"\bfrom\s+[\w.]+\s+import\s+")
#: The names a plain ``import`` binds (``import a.b as c``: c; ``import a.b``: a).
_IMPORT = re.compile(r"(?m)^[ \t]*import[ \t]+([^\n#;]+)")
#: The bounds every parse here keeps (a file's own pass keeps its own).
_MAX_DEPTH = 100
_MAX_NODES = 200_000
#: The labels that make a call of a sink a threat, and the rule each is.
_RULES = ((Source.DECODED, "CPL-THR-001"), (Source.REMOTE, "CPL-THR-020"))
_DOWNLOADED_RULE = "CPL-THR-002"


@dataclass(slots=True)
class SinkRegistries:
    """The registries of sinks of one scanned tree, and the calls out of imported names."""

    #: Sources that pass a code sink as a value: (relative, text), parsed at the end.
    definers: list[tuple[str, str]] = field(default_factory=list)
    #: Files that call an element of a name they import: (relative, text, those names as
    #: their module spells them).
    callers: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)
    #: By module (its path's parts, no suffix), the containers holding sinks, and which.
    registries: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = field(default_factory=dict)

    def note(self, relative: str, text: str) -> None:
        """Read one source's text (every source of the tree, in any order): two searches
        that almost every file fails; nothing is parsed until :meth:`findings`."""
        if _FILLS.search(utf8(text)):
            self.definers.append((relative, text))
        called = _called_names(text)
        if called and "import" in text:
            imported = _imported_names(text)
            # the names as their module spells them (``import X as Y``; ``Y[...](``), and
            # a container of an imported module (``registry.HANDLERS[...](``, recall16)
            names = frozenset(imported[c] for c in called if c in imported) | frozenset(
                c.rpartition(".")[2] for c in called if c.partition(".")[0] in imported
            )
            if names:
                self.callers.append((relative, text, names))

    def findings(self, mode: ScanMode) -> list[Finding]:
        """The calls out of another module's registry of sinks, on data that runs."""
        if not self.definers or not self.callers:
            return []
        wanted = {name for _, _, names in self.callers for name in names}
        for relative, text in self.definers:
            if any(name in text for name in wanted):
                held = _registries(text)
                if held:
                    self.registries[_module_parts(relative)] = held
        held_names = {name for found in self.registries.values() for name in found}
        out: list[Finding] = []
        for relative, text, names in self.callers:
            if names & held_names:
                out.extend(self._calls(relative, text, mode))
        return out

    def _calls(self, relative: str, text: str, mode: ScanMode) -> list[Finding]:
        parsed = _parse(text)
        if parsed is None:
            return []
        tree, flow = parsed
        scan = FileScan(relative, text, NO_GRANTS, (), mode)
        here = _module_parts(relative)
        is_package = relative.endswith("__init__.py")
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = _container_called(node.func)
            if name is None:
                continue
            sinks = self._held(flow, name, here, is_package)
            if not sinks:
                continue
            labels = flow.labels(node.args[0])
            sources = {s for s, _ in labels}
            detail = dict(
                sorted(labels, key=lambda label: (not label[1].startswith("."), label[1]))
            )
            api = f"{sinks[0].removeprefix('builtins.')}(...) out of {name}"
            for source, rule_id in _RULES:
                if source in sources:
                    scan.emit(rule_id, f"{api} of {detail[source]}", node.lineno, node.col_offset)
            if Source.DOWNLOADED in sources and Source.REMOTE not in sources:
                scan.emit(
                    _DOWNLOADED_RULE,
                    f"{api} of {detail[Source.DOWNLOADED]}",
                    node.lineno,
                    node.col_offset,
                )
        return scan.findings

    def _held(
        self, flow: Flow, name: str, here: tuple[str, ...], is_package: bool
    ) -> tuple[str, ...]:
        """The sinks of the registry the imported ``name`` is, if it is one."""
        head, _, rest = name.partition(".")
        for origin in flow.bindings.imports.get(head, ())[:8]:
            level = len(origin) - len(origin.lstrip("."))
            parts = tuple(p for p in origin[level:].split(".") if p)
            if rest:
                # registry.HANDLERS of ``from . import registry`` (spelled "..registry": a
                # dot for the level, one before the empty module's name) or ``import
                # pkg.registry as registry``: the module is what the name binds (recall16)
                level -= 1 if level and len(parts) == 1 else 0
                *middle, attribute = rest.split(".")
                module = parts + tuple(middle)
            elif len(parts) < 2 and not level:
                continue
            else:
                module, attribute = parts[:-1], parts[-1]
            if level:
                base = here if is_package else here[:-1]
                base = base[: len(base) - (level - 1)] if level > 1 else base
                candidates = [base + module]
            else:
                candidates = [k for k in self.registries if k[-len(module) :] == module]
            for key in candidates:
                sinks = self.registries.get(key, {}).get(attribute)
                if sinks:
                    return sinks
        return ()


def _parse(text: str) -> tuple[ast.Module, Flow] | None:
    """``text`` parsed and surveyed (bounded), with its data flow; ``None`` if it cannot be."""
    from caplet._scan._flow import Flow
    from caplet._scan._syntax import Survey, survey

    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    result = survey(tree, _MAX_DEPTH, _MAX_NODES)
    if not isinstance(result, Survey):
        return None
    return tree, Flow(result.bindings, result.nodes, result.scopes)


def _registries(text: str) -> dict[str, tuple[str, ...]]:
    """The module-level containers of ``text`` that hold code sinks, and the sinks."""
    parsed = _parse(text)
    if parsed is None:
        return {}
    tree, flow = parsed
    names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(
            statement.value, ast.Dict | ast.List | ast.Tuple | ast.Set | ast.Call
        ):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    found: dict[str, tuple[str, ...]] = {}
    for name in sorted(names)[:64]:
        elements = flow.any_element(ast.Name(id=name, ctx=ast.Load()), 0)
        sinks = tuple(dict.fromkeys(r for r in elements if _code_sink(r)))
        if sinks:
            found[name] = sinks
    return found


def _code_sink(name: str) -> bool:
    return name in EXECUTORS or API_RULES.get(name) == "CPL-PROC-001"


def _container_called(func: ast.expr) -> str | None:
    """``NAME`` of a call of ``NAME[...]``, ``NAME.get(...)`` or ``NAME.pop(...)``; a
    module's container is dotted (``registry.HANDLERS``)."""
    if isinstance(func, ast.Subscript):
        return _dotted(func.value)
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute):
        return _dotted(func.func.value) if func.func.attr in {"get", "pop"} else None
    return None


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of attributes on a name (at most four deep)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute) and len(parts) < 4:
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _called_names(text: str) -> set[str]:
    """The names whose element ``text`` calls, read on the lines holding ``](`` or ``)(``."""
    names: set[str] = set()
    lines = 0
    for token in ("](", ")("):
        start = text.find(token)
        while start >= 0 and lines < _MAX_CALL_LINES:
            lines += 1
            begin = text.rfind("\n", 0, start) + 1
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            names.update(_CALLED_ELEMENT.findall(text, begin, end))
            start = text.find(token, end)
    return names


def _imported_names(text: str) -> dict[str, str]:
    """By the name an import binds, the name it imports (``X as Y``: Y -> X; a plain
    ``import a.b`` binds ``a``)."""
    out: dict[str, str] = {}
    for match in _IMPORT.finditer(text):
        for piece in match.group(1).split(","):
            words = piece.split()
            if words:
                bound = words[-1] if len(words) == 3 and words[1] == "as" else words[0]
                out[bound.partition(".")[0]] = bound.partition(".")[0]
    for names in _from_imports(text):
        for piece in names.strip("()").split(","):
            words = piece.split("#", 1)[0].split()
            if words:
                out[words[-1]] = words[0]
    return out


def _from_imports(text: str) -> Iterator[str]:
    """What each ``from ... import`` of ``text`` imports: ``(a, b)`` up to its ``)``, or the
    rest of its line; what ``re.finditer(r"...import\\s+(\\([^)]*\\)|[^\\n]+)")`` gave.

    That search read to the end of the text for each ``(`` no ``)`` closes, before it
    took the line instead: 8,000 ``from a import (`` lines (128 KB) took 1.2 s, 2 MiB
    minutes (attack25). Whether a ``)`` follows is known from the last one's place."""
    last_close = text.rfind(")")
    at = 0
    while (match := _FROM_IMPORT.search(text, at)) is not None:
        start = match.end()
        if start == len(text):
            return  # only blanks follow (the search gave them back as the names: none)
        if text[start] == "(" and start < last_close:
            end = text.index(")", start) + 1
        else:
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
        yield text[start:end]
        at = end


def _module_parts(relative: str) -> tuple[str, ...]:
    """``pkg/registry.py`` -> ``("pkg", "registry")``; a package's ``__init__.py`` is it."""
    stem = posixpath.splitext(relative)[0]
    parts = tuple(p for p in stem.split("/") if p)
    return parts[:-1] if parts and parts[-1] == "__init__" else parts
