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
  there, or a file started to outlive the install (in a new session or detached: blind37's
  ``java -jar`` of a shipped jar), which no build step is.
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
    if not (imported or _detached(flow, node, api, name)) or _output_read(flow, node):
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


#: ``creationflags`` bits that cut a Windows child loose from the install
#: (``DETACHED_PROCESS``, ``CREATE_NEW_PROCESS_GROUP``, ``CREATE_BREAKAWAY_FROM_JOB``).
_DETACHING_FLAGS = 0x8 | 0x200 | 0x01000000
#: Calls that wait for the program they start (a build step's shape, whatever session it
#: is started in: ``start_new_session`` there lets the script kill the whole group).
_WAITING = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call"})
#: What is called on a ``Popen`` to wait for it.
_WAITS = frozenset({"wait", "communicate"})
#: Programs that start the rest of their command line cut loose from the caller, waited
#: for or not (``setsid -f`` forks; ``nohup``'s child outlives a hang-up).
_DETACHERS = frozenset({"setsid", "nohup", "daemonize", "start-stop-daemon", "disown"})
#: ``os.spawn*`` modes that return without waiting (``P_NOWAIT``/``P_NOWAITO`` 1,
#: ``P_DETACH`` 4); ``P_WAIT`` is 0.
_SPAWN_WAIT = 0


def _detached(flow: Flow, node: ast.Call, api: str, program: str) -> bool:
    """The program is started to outlive its caller: in a new session
    (``start_new_session=True``, ``preexec_fn=os.setsid``, ``process_group=0``), detached
    from the console and job (``creationflags`` with ``DETACHED_PROCESS``), under
    ``setsid``/``nohup``, or by ``os.spawn*`` without ``P_WAIT``. A build step is waited
    for (its result is the build); a payload started from an install script this way
    keeps running after pip returns (blind37's ``java -jar`` of a shipped jar,
    subprocess(3.12) ``start_new_session``, setsid(2)).

    What cannot be read fails closed (attack38): a session flag that is not a literal
    false (``start_new_session=1``, a variable), any ``process_group`` or ``preexec_fn``
    (a lambda calling ``os.setsid``), options spread from a mapping (``**kw``), flags of
    unknown value; a start that is waited for (``run``, ``check_call``, ``Popen(...)
    .wait()``) is a build step whatever its session, as it was before blind37."""
    if program in _DETACHERS:
        return True
    if api.startswith("os.spawn"):
        if not node.args:
            return True
        mode = flow.evaluate(node.args[0])
        return not (mode == _SPAWN_WAIT or "os.P_WAIT" in flow.resolve(node.args[0]))
    if _waited(flow, node):
        return False
    for keyword in node.keywords:
        value = keyword.value
        if keyword.arg is None:
            return True  # ``**options``: what they hold is not read here
        if keyword.arg in ("start_new_session", "setsid"):
            if not _false(flow, value):
                return True
        elif keyword.arg in ("process_group", "preexec_fn", "setpgroup"):
            if not (isinstance(value, ast.Constant) and value.value is None):
                return True
        elif keyword.arg == "creationflags":
            flags = _flags(flow, value)
            if flags is None or flags & _DETACHING_FLAGS:
                return True
    return False


def _false(flow: Flow, node: ast.expr) -> bool:
    """``node`` is a literal false (``False``, ``0``, ``None``), by value, not by name."""
    if isinstance(node, ast.Constant):
        return not node.value
    value = flow.evaluate(node)
    return value is not None and not value


def _waited(flow: Flow, node: ast.Call) -> bool:
    """The caller waits for the program: a call that does (``subprocess.run``), or
    ``wait``/``communicate`` on the ``Popen`` itself or on the one name bound to it."""
    if not _WAITING.isdisjoint(flow.resolve(node.func)):
        return True
    names = {
        name for name, values in flow.bindings.assigned.items() if any(v is node for v in values)
    }
    for call in flow.calls():
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _WAITS):
            continue
        if func.value is node or (isinstance(func.value, ast.Name) and func.value.id in names):
            return True
    return False


def _flags(flow: Flow, node: ast.expr) -> int | None:
    """An integer flag word: a literal, ``subprocess.DETACHED_PROCESS`` and its kin by
    name, or such words or-ed together; ``None`` when a part is unknown."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _flags(flow, node.left), _flags(flow, node.right)
        return None if left is None or right is None else left | right
    value = flow.evaluate(node)
    if isinstance(value, int):
        return value
    names = {n.rsplit(".", 1)[-1] for n in flow.resolve(node)}
    known = {
        "DETACHED_PROCESS": 0x8,
        "CREATE_NEW_PROCESS_GROUP": 0x200,
        "CREATE_BREAKAWAY_FROM_JOB": 0x01000000,
        "CREATE_NO_WINDOW": 0x08000000,
    }
    found = [known[n] for n in names if n in known]
    return found[0] if found else None


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
