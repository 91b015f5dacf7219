"""Browser shortcuts rewritten to load an extension (CPL-THR-009).

A stealer that drops a browser extension keeps it loaded by rewriting the user's
browser shortcuts (Windows ``.lnk`` files through ``WScript.Shell``, freedesktop
``.desktop`` launchers) so that every launch passes ``--load-extension=<dir>``
(Phylum's 2023 write-up of the web3 typosquats that replaced copied wallet
addresses). A test harness starting Chrome with the flag (selenium, playwright)
never touches a shortcut, so the flag counts only in a file that opens or edits
shortcuts.
"""

from __future__ import annotations

import ast
import operator

from caplet._scan._flow import Flow

__all__ = ["shortcut_hijacks"]

#: The browser switch that loads an unpacked extension from a folder.
_LOAD_EXTENSION = "--load-extension"
#: Shortcut files and the calls and keys that edit them.
_SHORTCUT_SUFFIXES = (".lnk", ".desktop")
_SHORTCUT_CALLS = frozenset({"CreateShortCut", "CreateShortcut"})
#: What the file's strings, joined by NULs and lowered, hold when one may name a shortcut.
_MAY_EDIT = (*(suffix + "\0" for suffix in _SHORTCUT_SUFFIXES), "exec=")
_ATTR = operator.attrgetter("attr")
_VALUE = operator.attrgetter("value")


def _text(flow: Flow, node: ast.AST) -> str:
    """What a literal or an expression of literals evaluates to, or ``""``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp | ast.JoinedStr):
        value = flow.evaluate(node)
        return value if isinstance(value, str) else ""
    return ""


def _edits_shortcuts(flow: Flow) -> bool:
    """The file names a shortcut file, a launcher's ``Exec=`` line or the call that opens
    a ``.lnk`` (``WScript.Shell``'s ``CreateShortCut``)."""
    # Every node of every parsed file passes here: the string is lowered only where it can
    # matter (its tail; the whole of it only when it holds "="), 3% of a package scan's CPU
    # on the benign corpus before (issue 16). Lowering maps character by character, so
    # the tail of the lowered string is the lowered tail (the suffixes are ASCII).
    # Only attributes and constants can answer, each class's nodes looked at apart (the
    # answer is the same in any order): a walk of every node was 2% of a package scan's
    # CPU on the benign corpus (issue 16).
    # Both loops below are looked at only when a test at C speed says they may answer:
    # an attribute named so, or the file's strings joined and lowered holding a suffix
    # at a string's end or "exec=" (lowering maps each character apart, so the joined
    # text lowered is each string lowered; no string's end is missed, and a false "may"
    # is settled by the exact loop): the loops were 2% of the rules' CPU (issue 16).
    attributes = flow.of_kind(ast.Attribute)
    strings = [v for v in map(_VALUE, flow.of_kind(ast.Constant)) if v.__class__ is str]
    joined = "\0".join(strings).lower() + "\0"
    if _SHORTCUT_CALLS.isdisjoint(map(_ATTR, attributes)) and not any(
        marker in joined for marker in _MAY_EDIT
    ):
        return False
    tail = max(len(s) for s in _SHORTCUT_SUFFIXES)
    for node in attributes:
        if node.attr in _SHORTCUT_CALLS:  # type: ignore[attr-defined]
            return True
    for node in flow.of_kind(ast.Constant):
        text = node.value  # type: ignore[attr-defined]
        if isinstance(text, str) and (
            text[-tail:].lower().endswith(_SHORTCUT_SUFFIXES)
            or ("=" in text and "exec=" in text.lower())
        ):
            return True
    return False


def shortcut_hijacks(flow: Flow) -> list[ast.AST]:
    """Where ``--load-extension`` is put into what a file that edits browser shortcuts
    writes: the literal (or the expression built from literals) that carries it."""
    if not _edits_shortcuts(flow):
        return []
    found = (
        node
        for node in flow.nodes
        if isinstance(node, ast.Constant | ast.BinOp | ast.JoinedStr)
        and _LOAD_EXTENSION in _text(flow, node)
    )
    first = next(found, None)
    return [] if first is None else [first]
