"""Code a worker's importers run is the bytes of a file inside its roots (attack24).

steer22 and attack23 guarded the path hooks and ``FileLoader.get_data``, both
Python attributes: a plugin sets them again. ``loader = type(helpers.__loader__)``,
then ``loader.get_data = loader.get_data.__wrapped__`` (the original, which
``functools.wraps`` keeps) or any function that reads ``/tmp/x/evil.py``, then
``loader("evil", "/tmp/x/evil.py").load_module()``: the module the plugin wrote
ran (none of it names an import API the scanner reads). And without any loader,
a code object made from the plugin's data (``f.__code__.replace(co_code=...)``,
``type(f.__code__)(...)``) runs bytecode no scanner read.

An audit hook (:func:`sys.addaudithook`) is the one thing a plugin cannot take
out of its interpreter, so the guard is one, installed before the plugin is
imported:

- ``compile`` called by importlib (``source_to_code``): the file named must lie
  inside the roots (``_plugin_load._within``'s rule) and the source compiled must
  be that file's bytes, read again here: a ``get_data`` replaced to read another
  file, or to return other bytes under a snapshot path, is refused;
- ``marshal.loads`` called by importlib (``_compile_bytecode``, a ``.pyc``): the
  same for its ``bytecode_path``, after the 16-byte header;
- ``compile`` called by the standard library's runners of text (``timeit``,
  ``codeop``, ``code``, ``runpy``, ``doctest``, ``pdb``, ``bdb``, ``profile``,
  ``cProfile``, ``trace``): refused; the scanner names none of them as dynamic code;
- ``code.__new__`` (a code object made or ``replace``-d) called by code outside
  the runtime (the plugin's own): refused. The runtime's own uses stay
  (``types.coroutine`` flips a flag of a function's code).

What the hook uses is taken when it is installed (``os.open``, ``os.path.realpath``,
``sys._getframe``): a plugin that replaces them later changes nothing here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, cast

__all__ = ["guard_code_origin"]

#: The frames of importlib itself (frozen into the interpreter).
_IMPORTLIB = frozenset(("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"))
#: The standard library's modules that compile text they are handed and run it
#: (``timeit.Timer(text).timeit()``, ``codeop.compile_command(text)``, ``runpy.run_path``):
#: none is a name the scanner reads as dynamic code, and text from the plugin's data
#: ran through them. The runtime's code generators (dataclasses, namedtuple) stay.
_TEXT_RUNNERS = (
    "timeit.py",
    "codeop.py",
    "code.py",
    "runpy.py",
    "doctest.py",
    "pdb.py",
    "bdb.py",
    "cProfile.py",
    "profile.py",
    "trace.py",
)
#: The bytes of a .pyc before its marshalled code object.
_PYC_HEADER = 16
#: The most bytes of a file read to compare (a source the scanner reads is at most 2 MiB;
#: a larger file than this is no file the importers are expected to run).
_MAX_BYTES = 64 << 20


def guard_code_origin(roots: tuple[str, ...], runtime: tuple[str, ...]) -> None:
    """Install the hook (module docstring). ``roots`` are the snapshot's and the runtime's
    folders, each ending with ``os.sep``; ``runtime`` the runtime's alone."""
    # Builtins too: ``builtins.isinstance`` is the plugin's to replace.
    is_a, sep, text, text_bytes = isinstance, os.sep, str, bytes
    realpath: Callable[[str], str] = os.path.realpath
    normpath: Callable[[str], str] = os.path.normpath
    isabs: Callable[[str], bool] = os.path.isabs
    getframe: Callable[[int], FrameType] = sys._getframe
    read = _reader(os.open, os.read, os.close)
    stdlib = normpath(os.path.dirname(os.__file__)) + sep  # noqa: PTH120 (no pathlib here)
    # As files, and as frozen into the interpreter (runpy is, in 3.11).
    runners = frozenset(stdlib + name for name in _TEXT_RUNNERS) | frozenset(
        f"<frozen {name[: -len('.py')]}>" for name in _TEXT_RUNNERS
    )

    def inside(path: object) -> str:
        """``path`` as ``_plugin_load._within`` reads it, or ImportError."""
        if is_a(path, text) and isabs(cast(str, path)):
            spelled = cast(str, path)
            if (normpath(spelled) + sep).startswith(roots):
                return spelled
            resolved = realpath(spelled)
            if (resolved + sep).startswith(roots):
                return resolved
        raise ImportError(f"{path} is neither the plugin's snapshot nor the runtime")

    def same(path: object, data: object, skip: int, what: str) -> None:
        checked = inside(path)
        if not is_a(data, text_bytes) or read(checked)[skip:] != data:
            raise ImportError(
                f"{checked}: the {what} importlib was handed is not that file's content "
                "(a loader's get_data was replaced); only the plugin's snapshot and the "
                "runtime are imported from"
            )

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "compile":
            caller = getframe(1)
            if caller.f_code.co_filename in _IMPORTLIB:
                same(args[1], args[0], 0, "source")
            elif caller.f_code.co_filename in runners or (
                normpath(caller.f_code.co_filename) in runners
            ):
                raise RuntimeError(
                    f"{caller.f_code.co_filename} compiles the text it is given and runs it: "
                    "code no scanner read (a plugin's code is its .py files)"
                )
        elif event == "marshal.loads":
            caller = getframe(1)
            if caller.f_code.co_filename in _IMPORTLIB:
                same(caller.f_locals.get("bytecode_path"), args[0], _PYC_HEADER, "bytecode")
            elif not of_runtime(caller.f_code.co_filename):
                # marshal makes code objects without code.__new__.
                raise RuntimeError(refusal(caller.f_code.co_filename, "marshal.loads"))
        elif event == "code.__new__":
            where = getframe(1).f_code.co_filename
            if not of_runtime(where):
                raise RuntimeError(refusal(where, "types.CodeType, code.replace"))

    def of_runtime(where: str) -> bool:
        """Whether code of the file ``where`` is the runtime's (or frozen into it)."""
        if where.startswith("<frozen "):
            return True
        return isabs(where) and (normpath(where) + sep).startswith(runtime)

    def refusal(where: str, how: str) -> str:
        return (
            f"{where} made a code object ({how}): it would run bytecode no scanner read; "
            "a plugin's code is its .py files"
        )

    sys.addaudithook(hook)


def _reader(
    open_: Callable[..., int], read_: Callable[[int, int], bytes], close: Callable[[int], None]
) -> Callable[[str], bytes]:
    """A whole-file reader over the functions given (taken before any plugin ran)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK

    def read(path: str) -> bytes:
        try:
            fd = open_(path, flags)
        except OSError as exc:
            raise ImportError(f"{path} cannot be read to check it ({exc.strerror})") from None
        try:
            chunks: list[bytes] = []
            size = 0
            while size <= _MAX_BYTES:
                chunk = read_(fd, 1 << 20)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                size += len(chunk)
            raise ImportError(f"{path} is larger than any module the worker imports")
        except OSError as exc:
            raise ImportError(f"{path} cannot be read to check it ({exc.strerror})") from None
        finally:
            close(fd)

    return read
