"""pip run from code (CPL-THR-019): ``pip.main(["install", ...])``, pip's program told to
install another package, ``runpy`` running pip with an install put in ``sys.argv``.

Split out of :mod:`caplet._scan._sinks` (one concern: whether a call is pip installing
something; :class:`caplet._scan._sinks.Sinks` reports it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import PurePosixPath

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._sources import Source

__all__ = ["PipSinks", "installs_other"]

#: pip's program names: pip, pip3, pip3.11, pip.exe.
_PIP = re.compile(r"pip[0-9.]*(?:\.exe)?", re.IGNORECASE)

#: What a package carries itself: pip told to act by it, in an install script, is the
#: package's doing (a file it ships, a blob it decodes, what it downloads).
_SHIPPED_DATA = frozenset({Source.PACKAGED, Source.DECODED, Source.DOWNLOADED, Source.REMOTE})

#: The nodes that may put an install into ``sys.argv`` (see ``PipSinks._installs_argv``).
_ARGV_KINDS = frozenset({ast.Assign, ast.AugAssign, ast.Call})


#: Python's package runners, which fetch a package and run (or install) its command.
_RUNNERS = frozenset({"uvx", "pipx", "uv", "uvx.exe", "pipx.exe", "uv.exe"})


def _runs_fetched_tool(words: list[str]) -> bool:
    """A package runner given a package by URL: ``uvx --from git+https://...``, ``pipx run
    --spec https://...``, ``uv tool install git+...`` (blind17, b17-dr-uvx-git-spec): a
    package the resolver never saw, fetched and run."""
    if not words or PurePosixPath(words[0]).name not in _RUNNERS:
        return False
    return any(w.startswith(("git+", "http://", "https://")) for w in words)


def installs_other(words: list[str]) -> bool:
    """``pip install NAME`` (or a URL; ``pip3``, ``pip3.11``, ``pip.exe`` too): not
    ``pip install .`` or ``-r requirements.txt``."""
    if _runs_fetched_tool(words):
        return True
    if "install" not in words or not any(_PIP.fullmatch(PurePosixPath(w).name) for w in words):
        return False
    targets = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
    return any(not w.startswith((".", "/", "~")) and "requirements" not in w for w in targets)


class PipSinks:
    """The pip checks of :class:`caplet._scan._sinks.Sinks` (a mixin: the state is the
    sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    #: :class:`caplet._scan._sink_sliced.SlicedNames`'s (a name sliced out of a builtin's text).
    _sliced_from_builtins: Callable[[ast.expr], bool]

    def _runs_pip(self, target: ast.expr) -> bool:
        """``runpy``'s target is pip: the module ``pip`` (or one of its own), or a path
        into pip's package directory."""
        flow = self._flow
        name = flow.name_value(target) or flow.path_text(target) or ""
        parts = re.split(r"[./\\:]", name)
        if name and (parts[0] == "pip" or "pip" in parts[:-1]):
            return True
        # os.path.join(os.path.dirname(pip.__file__), "__main__.py")
        return any(
            isinstance(n, ast.Attribute)
            and n.attr in {"__file__", "__path__"}
            and "pip" in flow.resolve(n.value)
            for n in ast.walk(target)
        )

    def _installs_argv(self) -> bool:
        """``sys.argv`` given an install anywhere in the file (assigned, a slice of it
        assigned, extended or appended to): what ``runpy`` then hands pip."""
        flow = self._flow
        values: list[ast.expr] = []
        for node in flow.nodes:
            if type(node) not in _ARGV_KINDS:
                continue
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    owner = target.value if isinstance(target, ast.Subscript) else target
                    if "sys.argv" in flow.resolve(owner):
                        values.append(node.value)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"extend", "append", "insert", "__setitem__"}
                and "sys.argv" in flow.resolve(node.func.value)
            ):
                values.extend(node.args)
        return self._install_args(values)

    def _installs(self, node: ast.Call) -> bool:
        """``pip.main(["install", ...])`` (or ``args=``): an install, not pip's own entry
        point; the list may be filled after it is made (``a = []; a.append("install")``).
        In an install script, pip given arguments read from what the package ships or
        decodes (a file beside setup.py, a decoded blob; not the user's command line,
        ``pip.main(sys.argv[1:])`` is pip's own entry point) counts too: what it is told
        to do cannot be checked, and the safe answer wins (recall5, issue 16)."""
        exprs = [*node.args, *(k.value for k in node.keywords)]
        if self._install_args(exprs):
            return True
        flow = self._flow
        return self._scan.installer and any(
            flow.evaluate(e) is None and any(s in _SHIPPED_DATA for s, _ in flow.labels(e))
            for e in exprs
        )

    def _loaded_installs(self, node: ast.Call) -> bool:
        """In an install script, a callable got at run time (the result of a call:
        ``ep.load()(...)`` for the ``console_scripts`` entry point named "pip", or a name
        bound to one) given pip's own arguments for installing another package
        (``["install", URL]``): pip run without its name in the code (blind35,
        b35-cn-entry-points-pip-load). ``["install", "--help"]`` or ``["install", "."]``
        installs nothing else."""
        func = node.func
        if isinstance(func, ast.Name):
            bound = self._flow.bindings.assigned.get(func.id, ())
            func = bound[0] if len(bound) == 1 else func
        if not (self._scan.installer and isinstance(func, ast.Call) and node.args):
            return False
        value = self._flow.evaluate(node.args[0])
        return (
            isinstance(value, list)
            and bool(value)
            and value[0] == "install"
            and all(isinstance(w, str) for w in value)
            and installs_other(["pip", *(w for w in value if isinstance(w, str))])
        )

    def _install_args(self, exprs: list[ast.expr]) -> bool:
        """Any of ``exprs`` is (or names) a list with ``install`` in it, or the word."""
        flow = self._flow
        pending: list[ast.expr] = list(exprs)
        seen: set[str] = set()
        while pending:
            arg = pending.pop()
            value = flow.evaluate(arg)
            if (isinstance(value, list) and "install" in value) or value == "install":
                return True
            if isinstance(arg, ast.List | ast.Tuple) and any(
                flow.name_value(e) == "install" or self._sliced_from_builtins(e) for e in arg.elts
            ):
                return True  # the word, or one sliced out of a builtin's text to hide it
            if isinstance(arg, ast.Name) and arg.id not in seen and len(seen) < 8:
                seen.add(arg.id)
                pending.extend(flow.bindings.assigned.get(arg.id, ()))
                given = flow.contributed.get(arg.id, {}).values()
                if any(flow.name_value(v) == "install" for vs in given for v in vs):
                    return True
        return False
