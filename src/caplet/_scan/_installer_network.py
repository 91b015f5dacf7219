"""Network access at import time of a module the installer imports (recall10, issue 16).

A module ``setup.py`` imports from its own folder (:mod:`caplet._scan._installer_imports`)
keeps a module's chains: it runs at install only as far as setup.py calls into it, and a
build helper that downloads when asked (lxml's ``buildlibxml.py``, ``nodeenv.py``) is no
threat. Its *module-level* statements are another matter: ``import helper`` runs them at
install, so ``requests.post(...)`` written at the top of ``helper.py`` is network access
at install as surely as in setup.py (the red team's "network at module level of a module
setup.py imports", attack8, was left open by design). So an egress call in the module's
own scope (not in a function, not under an ``if __name__ == "__main__":`` guard, which
an import does not run) is CPL-THR-011, as it is in setup.py.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from caplet._scan._filescan import FileScan

__all__ = ["import_time_egress"]

#: A module-level ``if __name__ == "__main__":`` (either order, either quote), the
#: comparison alone: ``if __name__ == "__main__" or True:`` runs at import (attack11).
_MAIN_GUARD = re.compile(
    r"""^if\s*\(?\s*(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)"""
    r"""\s*\)?\s*:"""
)


def import_time_egress(scan: FileScan, node: ast.Call, api: str, scope: int) -> None:
    """CPL-THR-011 for an egress call ``node`` (to ``api``) surveyed in ``scope`` when
    the file is a module an install script imports (not pip's entry itself, whose
    chains already say so) and the call runs when it is imported."""
    if not scan.installer or scan.entry or scope != 0:
        return
    if node.lineno in _guarded(scan.text):
        return
    scan.emit(
        "CPL-THR-011",
        f"{api} (network access when the installer imports this module)",
        node.lineno,
        node.col_offset,
    )


@lru_cache(maxsize=4)
def _guarded(text: str) -> frozenset[int]:
    """The lines (1-based) of ``text`` inside a module-level ``__main__`` guard: from the
    guard to the next line that starts in the first column (a comment or a blank line
    does not end it)."""
    lines: set[int] = set()
    inside = False
    for number, line in enumerate(text.split("\n"), start=1):
        if line[:1] not in {"", " ", "\t", "#", "\f"}:
            inside = _MAIN_GUARD.match(line) is not None
        if inside:
            lines.add(number)
    return frozenset(lines)
