"""Plugin code shared by the hostile cases: helpers every attack plugin starts with.

A case's ``body`` is appended to :data:`PRELUDE`, so each family module
only writes the attack itself. Attacks report what the kernel said as data
(``{"errno": "ENOENT"}``) rather than raising, because the errno is the
evidence of which layer stopped them; an attack that succeeded says so
(``{"escaped": ...}``), which the bench counts as not contained.
"""

from __future__ import annotations

__all__ = ["PRELUDE", "SYSCALL"]

#: Shared by every hostile plugin: helpers, ``ping``, ``crash`` and a
#: ``create_functions`` that registers ``run`` (defined by the body), ``ping``
#: and ``crash``.
PRELUDE = """
import errno
import os

CONFIG = {}


def errname(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))


def attempt(action, *args):
    try:
        value = action(*args)
    except OSError as exc:
        return {"errno": errname(exc)}
    return {"escaped": repr(value)[:200]}


def read(path):
    with open(path, "rb") as handle:
        return handle.read(64)


def write(path):
    with open(path, "wb") as handle:
        return handle.write(b"pwned by a plugin")


def ping():
    return os.getpid()


def crash():
    os._exit(3)


def create_functions(config):
    CONFIG.update(config)
    return {"main": {"run": run, "ping": ping, "crash": crash}}
"""

#: A raw system call through libc (``syscall(2)``), raising OSError on -1.
#: Arguments are integers; attacks pass 0 (NULL) for pointers, so that where
#: a missing filter lets the call through the kernel fails it on the
#: arguments (EFAULT, EINVAL) and nothing on the machine changes.
SYSCALL = """
import ctypes


def syscall(number, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result
"""
