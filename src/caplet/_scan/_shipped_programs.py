"""A program the package ships, started behind the user's back (CPL-THR-018).

Only where the package itself runs with nobody asking; a bundled tool a function starts
when the user calls it (tabula-py's ``java -jar tabula.jar``, ninja's and cmake's
wrappers) and a command-line shim run as ``python -m`` (ruff's ``__main__``) are not
this:

* at install (an install script) or when it is imported (module level of an
  ``__init__.py``), a Windows program the package ships, however it is started
  (blind13);
* when it is imported, any file the package ships (``join(dirname(__file__), ...)``), as
  the program or as what a program is handed (``java -jar lib/helper.jar``, ``node
  x.js``), started without the code reading its output: a background payload, not a
  tool asked a question (``check_output([bundled, "--version"])`` at import is one).
  torchtriton's compromised nightly ran an ELF it shipped from ``__init__``, and PyPI's
  Java stealers started a jar they shipped (blind15's b15-np-torchtriton-binary,
  -jar-stealer; recall16). An install script starts the package's own files to build it
  (``configure``, ``make`` on its Makefile, ``protoc`` on its files, its build scripts:
  cython's, llvmlite's, playwright's, pymupdf's setup.py): only a Windows program counts
  there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import PurePosixPath

from caplet._scan._flow import Flow
from caplet._scan._sources import Source

__all__ = ["shipped_start"]

#: Calls whose caller reads what the program prints (a question, not a payload).
_READ_OUTPUT = frozenset(
    {"subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput", "os.popen"}
)
#: At most this many words of an argument list are read for a shipped file.
_MAX_WORDS = 8


def shipped_start(
    flow: Flow,
    node: ast.Call,
    api: str,
    command: ast.expr,
    windows: Callable[[str], bool],
    *,
    imported: bool,
) -> str | None:
    """What ``node`` (a process call at install or import time, ``command`` what it
    runs: a command or an argument list) starts of the package's own files, shown as
    ``api(name)``; ``None`` when it starts none of them. ``windows`` says whether a name
    is a Windows program (:func:`caplet._scan._sink_commands.launches_payload`); ``imported``
    whether the call runs when the package is imported (any shipped file counts there
    only: an install script starts the package's ``configure``, ``make`` on its
    Makefile, ``protoc`` on its files, its build scripts: cython's, llvmlite's,
    playwright's setup.py)."""
    elements = command.elts if isinstance(command, ast.List | ast.Tuple) else [command]
    program = elements[0] if elements else command
    name = _name(flow, program)
    if windows(name) and _packaged(flow, program):
        return f"{api}({name})"
    if not imported or _output_read(flow, node):
        return None
    if isinstance(command, ast.Name):
        bound = flow.bindings.assigned.get(command.id, ())
        command = bound[0] if len(bound) == 1 else command
    words = command.elts if isinstance(command, ast.List | ast.Tuple) else [command]
    for word in words[:_MAX_WORDS]:
        if not isinstance(word, ast.Starred) and _packaged(flow, word):
            return f"{api}({_name(flow, word) or 'a file of the package'})"
    return None


def _name(flow: Flow, node: ast.expr) -> str:
    return PurePosixPath((flow.path_text(node) or "").replace("\\", "/")).name


def _packaged(flow: Flow, node: ast.expr) -> bool:
    return any(s is Source.PACKAGED for s, _ in flow.labels(node))


def _output_read(flow: Flow, node: ast.Call) -> bool:
    """The caller reads the program's output: ``check_output``, ``capture_output=True``,
    ``stdout=PIPE`` (then ``communicate``)."""
    if not _READ_OUTPUT.isdisjoint(flow.resolve(node.func)):
        return True
    for keyword in node.keywords:
        value = keyword.value
        if keyword.arg == "capture_output" and not (
            isinstance(value, ast.Constant) and not value.value
        ):
            return True
        if keyword.arg == "stdout" and "subprocess.PIPE" in flow.resolve(value):
            return True
    return False
