"""The files the code-origin guard checks: read once, through the descriptor it resolved.

Part of :mod:`caplet._sandbox._code_origin` (split out by concern): what importlib
compiles or unmarshals must be the bytes of a ``.py`` (a runtime ``.pyc``) inside the
snapshot or the runtime, learnt from ``/proc/self/fd`` of the one descriptor read;
a native library loaded by path must be a file of the runtime. Every function here
is *sealed* (that module's docstring): it reads no global, builtin or cell, only its
positional defaults, bound at import before any plugin code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

__all__ = ["READ_FLAGS", "native", "normpath", "open_inside", "read_whole", "same"]

#: The bytes of a .pyc before its marshalled code object.
_PYC_HEADER: Final = 16
#: The most bytes of a file read to compare (a source the scanner reads is at most 2 MiB;
#: a larger file than this is no file the importers are expected to run).
_MAX_BYTES: Final = 64 << 20
READ_FLAGS: Final = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


def read_whole(
    fd: int,
    _read_fd: Callable[[int, int], bytes] = os.read,
    _close: Callable[[int], None] = os.close,
    _max: int = _MAX_BYTES,
    _join: Callable[[list[bytes]], bytes] = b"".join,
    _len: Callable[[bytes], int] = len,
    _error: type[ImportError] = ImportError,
    _os_error: type[OSError] = OSError,
) -> bytes:
    """The whole file open on ``fd`` (closed here), or ImportError."""
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= _max:
            chunk = _read_fd(fd, 1 << 20)
            if not chunk:
                return _join(chunks)
            chunks.append(chunk)
            size += _len(chunk)
        raise _error("a file larger than any module the worker imports was handed to import")
    except _os_error as exc:
        raise _error(f"a file to import cannot be read to check it ({exc.strerror})") from None
    finally:
        _close(fd)


def normpath(path: str, _join: Callable[[list[str]], str] = "/".join) -> str:
    """``os.path.normpath`` of an absolute POSIX path (posixpath's reads its module's
    globals, which are the plugin's to rebind)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + _join(parts)


def open_inside(
    path: object,
    where: tuple[str, ...],
    whose: str,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _open: Callable[[str, int], int] = os.open,
    _readlink: Callable[[str], str] = os.readlink,
    _close: Callable[[int], None] = os.close,
    _flags: int = READ_FLAGS,
    _error: type[ImportError] = ImportError,
    _os_error: type[OSError] = OSError,
) -> tuple[int, str]:
    """``path`` opened (as importlib would: links followed) and where the file really is,
    read from the descriptor; ImportError unless that lies inside ``where``. Only an
    exact ``str``: a subclass's methods are the plugin's code, run inside the hook."""
    if _type(path) is not _str or not path.startswith("/"):  # type: ignore[attr-defined]
        # Not the value itself, nor its type's name: either could be the plugin's code
        # (a __repr__, a metaclass's __name__), run inside the hook.
        raise _error(f"a value that is no str named no file of {whose} to import from")
    try:
        fd = _open(path, _flags)  # type: ignore[arg-type]
    except _os_error as exc:
        raise _error(f"{path} cannot be read to check it ({exc.strerror})") from None
    try:
        real = _readlink(f"/proc/self/fd/{fd}")
    except _os_error as exc:
        _close(fd)
        raise _error(f"{path}: where it lies cannot be read ({exc.strerror})") from None
    if not (real + "/").startswith(where):
        _close(fd)
        raise _error(f"{path} is not a file of {whose}: code is imported only from it")
    return fd, real


def native(
    name: object,
    where: tuple[str, ...],
    what: str,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _normpath: Callable[[str], str] = normpath,
    _open_inside: Callable[[object, tuple[str, ...], str], tuple[int, str]] = open_inside,
    _close: Callable[[int], None] = os.close,
    _error: type[ImportError] = ImportError,
) -> None:
    """ImportError unless the native library ``name`` is a file of ``where`` as spelled
    (no link of the plugin's on the way: ``where`` is read-only) and as opened. A bare
    name (``libc.so.6``, no ``/``) is the dynamic linker's to find in the system's own
    folders; ``None`` is the program itself."""
    if name is None or (_type(name) is _str and "/" not in name):  # type: ignore[operator]
        return
    if _type(name) is not _str:
        raise _error(f"{what} of a value that is no str: native code is loaded by path")
    if not (_normpath(name) + "/").startswith(where):  # type: ignore[arg-type]
        raise _error(
            f"{what} {name!r} is no file of the runtime: native code is loaded only from "
            "it (a library the plugin wrote, to a memfd or anywhere, is code no one read: "
            "attack27)"
        )
    fd, _real = _open_inside(name, where, "the runtime")
    _close(fd)


def same(
    path: object,
    data: object,
    bytecode: bool,
    where: tuple[str, ...],
    whose: str,
    _open_inside: Callable[[object, tuple[str, ...], str], tuple[int, str]] = open_inside,
    _read: Callable[[int], bytes] = read_whole,
    _close: Callable[[int], None] = os.close,
    _type: Callable[[object], type] = type,
    _kinds: tuple[type, ...] = (str, bytes),
    _header: int = _PYC_HEADER,
    _error: type[ImportError] = ImportError,
) -> None:
    """What importlib compiles (``bytecode``: unmarshals) is ``path``'s own content,
    read through the descriptor the check resolved."""
    fd, real = _open_inside(path, where, whose)
    if not real.endswith(".pyc" if bytecode else ".py"):
        _close(fd)
        raise _error(
            f"{path} is no Python source: importlib runs only .py files here (the "
            "scanner reads those; a loader made for another file runs code none read)"
        )
    content = _read(fd)
    if _type(data) not in _kinds or (content[_header:] if bytecode else content) != data:
        raise _error(
            f"{path}: the {'bytecode' if bytecode else 'source'} importlib was handed "
            "is not that file's content (a loader's get_data was replaced); only the "
            "plugin's snapshot and the runtime are imported from"
        )
