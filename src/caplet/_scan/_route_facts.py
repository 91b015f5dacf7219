"""What the scanner's route checks ask of a file (the data flow answers).

:mod:`caplet._scan._text_routes`, :mod:`caplet._scan._path_routes` and
:mod:`caplet._scan._annotation_text` each read a file through this, so none of them imports
the flow (``_flow`` imports the visitor's tables, not the other way).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable
from typing import Protocol

from caplet._scan._syntax import Bindings

__all__ = ["Facts", "named_in", "written"]


class Facts(Protocol):
    """What the checks ask of the file (the data flow answers)."""

    bindings: Bindings

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]: ...
    def closed(self, node: ast.AST) -> bool: ...
    def plain(self, node: ast.AST) -> bool: ...
    def evaluate(self, node: ast.AST) -> object: ...
    def parameter_names(self) -> frozenset[str]: ...


def written(node: ast.AST, facts: Facts) -> bool:
    """Whether ``node`` is text the source holds: a literal, or computed from literals."""
    return facts.plain(node) or facts.closed(node)


def named_in(names: Iterable[str], table: Collection[str]) -> bool:
    """Whether one of the resolved ``names`` is in ``table``: an entry ending in a dot
    is a module or class whose every attribute counts (``"json."`` holds ``json.load``)."""
    return any(
        name == entry or (entry.endswith(".") and name.startswith(entry))
        for name in names
        for entry in table
    )
