"""Text the interpreter and its standard library hold, which a name may be spelled from:
``string``'s constants, ``calendar``'s tables of names, the listing of a process or code
module, the class of a literal (``str(type(None))``).

Apart from :mod:`caplet._scan._evaluate` (which asks them for a name it evaluates) because
they are data about the running Python, reviewed together when a dropper spells a name
from another such table (blind32: "system" from weekday names, ``Popen`` found in
``dir(subprocess)`` by a test on its letters, "pip" and "main" from the texts of
``Ellipsis``, ``type(None)`` and ``NotImplemented``), and ``_evaluate`` had passed 600 lines.
"""

from __future__ import annotations

import ast
import importlib
import string
import sys
from collections.abc import Callable, Iterable
from typing import Final

from caplet._scan._values import Value, literal_object

__all__ = ["listing", "module_text", "type_of_literal"]

#: ``string`` module constants (the same in every interpreter).
_STRING_CONSTANTS: Final = frozenset(
    {
        "ascii_letters",
        "ascii_lowercase",
        "ascii_uppercase",
        "digits",
        "hexdigits",
        "octdigits",
        "punctuation",
        "printable",
        "whitespace",
    }
)

_MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
#: ``calendar``'s tables of names, as the C locale spells them (a locale set at run time
#: spells them otherwise: the safe reading is the default one).
_CALENDAR_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "day_name": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "day_abbr": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"),
    "month_name": ("", *_MONTHS),
    "month_abbr": ("", *(m[:3] for m in _MONTHS)),
}

#: Modules whose listing (``dir(m)``) the evaluator gives, as this interpreter has them:
#: the ones a dropper searches for a process, code or network function by a test on the
#: names (``n.startswith("Po") and n.endswith("en")`` over ``dir(subprocess)``). Standard
#: library modules only, imported by the scanner itself at the first such listing.
_LISTED: Final = ("os", "subprocess", "socket", "shutil", "pty", "sys", "importlib", "marshal")


def module_text(name: str) -> Value | None:
    """The value of a module attribute that is the interpreter's own text, by its
    resolved name (``string.ascii_lowercase``, ``calendar.day_name``), or ``None``."""
    module, _, attr = name.rpartition(".")
    if module == "string" and attr in _STRING_CONSTANTS:
        return str(getattr(string, attr))
    if module == "calendar" and attr in _CALENDAR_NAMES:
        return list(_CALENDAR_NAMES[attr])
    return None


def listing(names: Iterable[str]) -> list[Value] | None:
    """``sorted(dir(m))`` of the first of ``names`` (a resolved module) in :data:`_LISTED`."""
    for name in names:
        if name in _LISTED:
            try:
                module = sys.modules.get(name) or importlib.import_module(name)
            except ImportError:  # pty on Windows
                return None
            return sorted(dir(module))
    return None


def type_of_literal(node: ast.AST, resolve: Callable[[ast.AST], tuple[str, ...]]) -> type | None:
    """``type(None)``, ``type(1.5)``, ``type(...)``: the class of a literal, when the file
    never rebinds ``type`` (``resolve`` names the callee)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    if "builtins.type" not in resolve(node.func):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant):
        return type(arg.value)
    literal = literal_object(arg)
    return None if literal is None else type(literal)
