"""The user's documents gathered and sent out (CPL-THR-007).

Stealers sweep the user's own folders (Desktop, Documents, Downloads, OneDrive)
for files by extension (``*.txt``, ``*.docx``, ``*.pdf``, wallet and password
files) and upload them to a messenger webhook or a host of their own. No path
in such code is a known credential file, so the credential labels of the data
flow do not see it: here the value sent is followed back (through the names it
is bound to and the loops it is drawn from, bounded) to the literals it is
built from, and counts when those name one of the user's folders *and* a
document pattern. A folder alone (a download directory a tool writes into) or a
pattern alone (``*.txt`` under the package) is not the user's documents.
"""

from __future__ import annotations

import ast
import re

from caplet._scan._flow import Flow

__all__ = ["user_documents"]

#: The user's own folders, as a path component or a literal of its own.
_FOLDERS = re.compile(r"(?i)(?:^|[/\\])(desktop|documents|downloads|onedrive)(?:[/\\]|$)")
#: Files worth stealing from them, by glob or suffix.
_DOCUMENTS = re.compile(
    r"(?i)\.(?:txt|docx?|pdf|xlsx?|rtf|odt|csv|kdbx|wallet|key|seed)\b|wallet|"
    r"(?:^|[/\\])\*\.\*?$"
)
#: Nodes looked at when following a value back to its literals.
_BUDGET = 300


def _literals(flow: Flow, node: ast.AST) -> list[str]:
    """The string literals ``node`` is built from, through names (bound or iterated)."""
    found: list[str] = []
    pending: list[ast.AST] = [node]
    seen: set[str] = set()
    budget = _BUDGET
    while pending and budget > 0:
        for item in ast.walk(pending.pop()):
            budget -= 1
            if budget <= 0:
                break
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.append(item.value)
            elif isinstance(item, ast.Name) and item.id not in seen and len(seen) < 16:
                seen.add(item.id)
                pending.extend(flow.bindings.assigned.get(item.id, ())[:4])
                pending.extend(flow.bindings.iterated.get(item.id, ())[:4])
    return found


def user_documents(flow: Flow, payload: list[ast.expr]) -> str | None:
    """The user's folder a payload's files come from, or ``None``."""
    texts = [t for arg in payload for t in _literals(flow, arg)]
    folder = next((m.group(1) for t in texts if (m := _FOLDERS.search(t))), None)
    if folder is None or not any(_DOCUMENTS.search(t) for t in texts):
        return None
    return folder.capitalize()
