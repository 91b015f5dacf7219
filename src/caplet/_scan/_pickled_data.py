"""Data files a package ships that run code when they are loaded: pickles (blind17).

A pickle names the callables it calls (the ``GLOBAL``/``INST`` opcodes up to protocol 3,
``STACK_GLOBAL`` after two short strings from protocol 4), and ``pickle.load``,
``torch.load(weights_only=False)``, ``joblib.load`` and ``numpy.load(allow_pickle=True)``
call them. blind17's samples shipped a model file whose pickle calls ``builtins.exec`` and
an ``.npy`` whose object array is a pickle of ``os.system`` (JFrog 2024 on Hugging Face
models, ReversingLabs 2025 "nullifAI", Trail of Bits 2024 "Sleepy Pickle"). A model's own
pickle names tensor rebuilders, ``collections.OrderedDict``, ``_codecs.encode``, numpy's
reconstructors; a process, a shell, exec or an import by name is never model data.

Only files named as serialized data are read (by their ending), at most their first
:data:`MAX_PICKLE_BYTES` (a model's pickle comes first: ``torch.save`` writes ``data.pkl``
first, stored, not compressed); one RE2 search over those bytes.
"""

from __future__ import annotations

import os
import stat
from typing import Final

import re2

from caplet._scan._collect_read import read_up_to

__all__ = ["MAX_PICKLE_BYTES", "PICKLE_SUFFIXES", "pickled_call", "read_prefix"]

#: File endings of serialized data a loader unpickles (lower case).
PICKLE_SUFFIXES: Final = (
    ".pkl",
    ".pickle",
    ".pck",
    ".dill",
    ".joblib",
    ".sav",
    ".pt",
    ".pth.tar",
    ".ckpt",
    ".bin",
    ".npy",
    ".npz",
    ".model",
)
#: How much of a data file is read for the callables its pickle names.
MAX_PICKLE_BYTES: Final = 8 << 20

#: Modules any callable of which is no data: processes, shells, the network, native code,
#: code run by name.
_MODULES = (
    rb"os|posix|nt|subprocess|pty|runpy|socket|ctypes|webbrowser|code|commands|pip|"
    rb"importlib|shutil|asyncio\.subprocess"
)
#: builtins' callables that run code or import by name.
_BUILTINS = rb"exec|eval|compile|execfile|__import__|breakpoint"
#: Bytes, not UTF-8: the opcodes and lengths are single bytes past 0x7f.
_LATIN1 = re2.Options()
_LATIN1.encoding = re2.Options.Encoding.LATIN1
_CALLS: Final = re2.compile(
    # GLOBAL ('c') or INST ('i'): module and name on their own lines (protocols 0-3)
    rb"[ci](" + _MODULES + rb")\n(\w{1,64})\n|"
    rb"[ci](builtins|__builtin__)\n(" + _BUILTINS + rb")\n|"
    # SHORT_BINUNICODE module, name, (MEMOIZE,) STACK_GLOBAL (protocol 4 and on)
    rb"\x8c[\x01-\x40](" + _MODULES + rb")\x94?\x8c[\x01-\x40](\w{1,64})\x94?\x93|"
    rb"\x8c[\x01-\x40](builtins)\x94?\x8c[\x01-\x40](" + _BUILTINS + rb")\x94?\x93",
    _LATIN1,
)


def pickled_call(data: bytes) -> str | None:
    """The first process, shell, network or code-running callable a pickle in ``data``
    names (``"os.system"``), or ``None``."""
    match = _CALLS.search(data)
    if match is None:
        return None
    groups = match.groups()  # (module, name) of each alternative, one pair matched
    for module, name in zip(groups[::2], groups[1::2], strict=True):
        if module is not None and name is not None:
            owner = "builtins" if module == b"__builtin__" else module.decode()
            return f"{owner}.{name.decode()}"
    return None  # pragma: no cover - one alternative always matched


def read_prefix(path: str, limit: int = MAX_PICKLE_BYTES) -> bytes | None:
    """The first ``limit`` bytes of the regular file ``path`` (not followed if a link), or
    ``None`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return read_up_to(fd, limit, min(limit, info.st_size + 1))
    except OSError:
        return None
    finally:
        os.close(fd)
