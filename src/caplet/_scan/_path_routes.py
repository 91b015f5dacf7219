"""Entries put on ``sys.path`` that hold code no reviewer reads (attack26, scan27).

Python imports from every entry of ``sys.path``: a zip (``zipimport``; under any name,
``helpers.dat`` too) is code in an archive, and a folder chosen at run time, by data, is
wherever the data says. In plugin mode both are a module chosen at run time (CPL-DYN-002,
danger), asked by :func:`caplet._scan._text_routes.call_routes`. The plugin's own folder,
spelled in the source from ``__file__`` and literals, and the runtime's (``sysconfig``,
``site``) stay clean.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Final

from caplet._scan._route_facts import Facts, named_in, written

__all__ = ["PATH_ADDERS", "path_routes"]

#: ``sys.path``'s methods that add an entry.
PATH_ADDERS: Final = frozenset({"insert", "append", "extend", "__setitem__"})
#: File names zipimport imports from.
_ARCHIVE_SUFFIXES: Final = (".zip", ".egg", ".pyz", ".whl", ".par")
#: How deep a path's names are followed.
_MAX_DEPTH = 6


def path_routes(node: ast.Call, func: ast.Attribute, facts: Facts) -> Iterator[tuple[str, str]]:
    """``sys.path.insert(...)`` (or another of :data:`PATH_ADDERS`) of an archive or of a
    path chosen at run time: (rule id, what the finding says)."""
    if "sys.path" not in facts.resolve(func.value):
        return
    if any(_archive_named(a, facts, 0) for a in node.args):
        yield (
            "CPL-DYN-002",
            (
                f"sys.path.{func.attr}(...) of an archive (Python imports modules out of "
                "it, code no reviewer reads; ship the modules as .py files in the plugin)"
            ),
        )
    elif not all(written(a, facts) or _own_path(a, facts, 0) for a in node.args):
        # scan27, left open: a folder or an archive (under any name) chosen at run
        # time, by data, is where the next import's code comes from
        yield (
            "CPL-DYN-002",
            (
                f"sys.path.{func.attr}(...) of a path chosen at run time (Python imports "
                "modules from it, code no reviewer reads; add the plugin's own folder, "
                "spelled in the source)"
            ),
        )


def _archive_named(node: ast.AST, facts: Facts, depth: int) -> bool:
    """Whether ``node`` (or what a name in it is bound to) spells an archive's file name."""
    for item in ast.walk(node):
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            # a name followed: only an archive's suffix (``cfg = json.load(open("c.json"))``
            # names a file that is read, not put on the path)
            if _file_named(item.value) if depth == 0 else _archive_suffixed(item.value):
                return True
        elif isinstance(item, ast.Name) and depth < 2:
            bound = facts.bindings.assigned.get(item.id, ())
            if any(_archive_named(v, facts, depth + 1) for v in bound[:4]):
                return True
    return False


#: Calls that make a path of the paths and texts they are given (or name the runtime's
#: own folders), and attributes of a path that are paths.
_PATH_MAKERS: Final = (
    "builtins.str",
    "os.path.",
    "os.fspath",
    "pathlib.",
    "sysconfig.",
    "site.",
)
_PATH_PARTS: Final = frozenset(
    {"parent", "parents", "resolve", "absolute", "with_name", "joinpath", "__str__"}
)


def _own_path(node: ast.AST, facts: Facts, depth: int) -> bool:
    """Whether a ``sys.path`` entry is the plugin's own folder or one below it, spelled in
    the source: ``__file__`` and literals, joined by ``/``, ``+``, ``os.path`` or
    ``pathlib`` (or the runtime's folders, from ``sysconfig`` or ``site``)."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | int)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return True
        bound = facts.bindings.assigned.get(node.id, ())
        return bool(bound) and all(_own_path(v, facts, depth + 1) for v in bound[:8])
    if isinstance(node, ast.Attribute):
        return node.attr in _PATH_PARTS and _own_path(node.value, facts, depth + 1)
    if isinstance(node, ast.BinOp):
        return _own_path(node.left, facts, depth + 1) and _own_path(node.right, facts, depth + 1)
    if isinstance(node, ast.Subscript):  # Path(__file__).parents[1]
        return _own_path(node.value, facts, depth + 1) and isinstance(node.slice, ast.Constant)
    if isinstance(node, ast.Call):
        func = node.func
        made = named_in(facts.resolve(func), _PATH_MAKERS)
        if not made and not (isinstance(func, ast.Attribute) and func.attr in _PATH_PARTS):
            return False
        parts = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute) and not made:
            parts.append(func.value)
        return all(_own_path(p, facts, depth + 1) for p in parts)
    return isinstance(node, ast.List | ast.Tuple) and all(
        _own_path(e, facts, depth + 1) for e in node.elts
    )


def _archive_suffixed(text: str) -> bool:
    return text.lower().rstrip("/").endswith(_ARCHIVE_SUFFIXES)


def _file_named(text: str) -> bool:
    """Whether a path's text ends in a file's name: an archive's suffix, or any short
    suffix of letters (``helpers.dat``: a zip under another name is imported from just
    the same; a folder of the plugin's is named without one). A version's dot
    (``python3.11``) is no suffix."""
    last = text.lower().rstrip("/").rpartition("/")[2]
    if _archive_suffixed(last):
        return True
    stem, dot, suffix = last.rpartition(".")
    return bool(stem and dot and 0 < len(suffix) <= 8 and suffix[0].isalpha() and suffix.isalnum())
