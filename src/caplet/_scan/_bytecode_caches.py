"""Another module's bytecode cache rewritten from other source (blind17).

Python imports a module from its ``__pycache__`` ``.pyc`` when the cache is valid, and a
``.pyc`` compiled with ``PycInvalidationMode.UNCHECKED_HASH`` is valid whatever its source
says (PEP 552). blind17's sample (b17-ot-pycache-poison) compiled an installed library's
source with a payload prepended into that library's own cache path
(``py_compile.compile(tmp, cfile=importlib.util.cache_from_source(spec.origin))``): every
later import of the library runs the payload, and its source still reads clean.
Compiling a file into its own cache, or into a path of the tool's choosing, is what
``compileall`` and installers do.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = ["BYTECODE_COMPILERS", "CACHE_TOKENS", "foreign_cache"]

#: Calls that compile a source file into a ``.pyc`` at a path they are given.
BYTECODE_COMPILERS: Final = frozenset({"py_compile.compile"})
#: The cache path of a source file (``importlib.util.cache_from_source``).
_CACHE_PATHS: Final = frozenset({"importlib.util.cache_from_source"})


def _same(a: ast.expr, b: ast.expr, assigned: Mapping[str, Sequence[ast.expr]]) -> bool:
    """Whether ``a`` and ``b`` are written alike, or one is a name bound to the other."""
    if ast.dump(a) == ast.dump(b):
        return True
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ast.Name) and any(
            ast.dump(v) == ast.dump(y) for v in assigned.get(x.id, ())[:4]
        ):
            return True
    return False


def foreign_cache(
    node: ast.Call,
    resolve: Callable[[ast.expr], tuple[str, ...]],
    assigned: Mapping[str, Sequence[ast.expr]],
) -> str | None:
    """``py_compile.compile(src, cfile=cache_from_source(other))`` with ``src`` not
    ``other``: the cache of another file written from this source; else ``None``."""
    cfile = next((k.value for k in node.keywords if k.arg == "cfile"), None)
    if cfile is None and len(node.args) >= 2:
        cfile = node.args[1]
    source = node.args[0] if node.args else None
    if isinstance(cfile, ast.Name):
        bound = assigned.get(cfile.id, ())
        cfile = bound[0] if len(bound) == 1 else cfile
    if not (isinstance(cfile, ast.Call) and cfile.args and source is not None):
        return None
    if _CACHE_PATHS.isdisjoint(resolve(cfile.func)):
        return None
    if _same(source, cfile.args[0], assigned):
        return None
    return "another file's bytecode cache (py_compile.compile(..., cfile=cache_from_source(...)))"


#: The cache path as code spells it, for the prefilter (beside a compiler).
CACHE_TOKENS: Final = r"\bcache_from_source\b"
