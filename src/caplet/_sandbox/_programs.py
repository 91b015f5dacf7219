"""Resolving approved ``proc.exec`` programs into what the sandbox must expose.

A program is run by the kernel through its ELF interpreter (the dynamic
loader named in PT_INTERP, elf(5)), which the kernel opens for execution too
(``open_exec`` in fs/exec.c), so Landlock must allow executing both and
nothing else. Scripts (``#!``) are resolved to their interpreter as well;
the composition lint already warns that a shell or interpreter is
equivalent to every capability.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
from collections import deque
from pathlib import Path
from typing import BinaryIO

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant

__all__ = ["link_hops", "program_grants"]

_ELF_MAGIC = b"\x7fELF"
_PT_INTERP = 3
#: Links followed before giving up (the kernel's own limit, path_resolution(7)).
_MAX_LINKS = 40
#: Interpreters followed from a program (the kernel's BINPRM_MAX_RECURSION).
_MAX_INTERPRETERS = 4


def program_grants(program: str, *, search_path: str | None = None) -> tuple[PathGrant, ...]:
    """Executable grants for ``program`` (a name searched on the absolute entries of
    ``search_path``, ``os.defpath`` when None, or a path).

    SandboxError when the program does not exist on the host: a capability
    that cannot be honoured is refused rather than silently dropped.
    """
    absolute = Path(program).is_absolute()
    searched = search_path if search_path is not None else os.defpath
    # Only the absolute entries: an empty or relative one (``PATH=$PATH:``, ``.``,
    # ``bin``) is the host's current directory, so a project the host runs in
    # would supply the approved program (red team round 17; Go's exec.LookPath
    # refuses the same, ErrDot). An empty search path searches nothing.
    entries = [entry for entry in searched.split(os.pathsep) if Path(entry).is_absolute()]
    skipped = len(entries) < len(searched.split(os.pathsep))
    found = (
        program
        if absolute
        else shutil.which(program, path=os.pathsep.join(entries))
        if entries
        else None
    )
    if found is None or not Path(found).is_file():
        raise SandboxError(
            f"proc.exec program {program!r} was not found on this host"
            + ("" if absolute else f" (searched PATH={searched})")
            + ("; relative entries of PATH are not searched" if skipped and not absolute else "")
            + "; install it or declare its absolute path"
        )
    paths = [found, os.path.realpath(found)]
    # A script's interpreter is itself a program with an ELF interpreter, which
    # the kernel opens for execution too (Landlock checks that open: a
    # ``#!/bin/sh`` script failed with EACCES on ld.so). Follow the chain as
    # far as the kernel does (BINPRM_MAX_RECURSION, 4, in fs/exec.c).
    for _ in range(_MAX_INTERPRETERS):
        interpreter = _interpreter(paths[-1])
        if interpreter is None:
            break
        _check_runnable(interpreter)
        paths += [interpreter, os.path.realpath(interpreter)]
    return tuple(PathGrant(path, executable=True) for path in dict.fromkeys(paths))


def link_hops(path: str) -> tuple[str, ...]:
    """Every symbolic link that resolving the absolute ``path`` passes through, in order.

    A program's grant names its declared path and its final target, but the
    jail opens the declared path again, links followed, at every worker
    start: whoever may write where any link *on the way* lives can re-point
    it (``/opt/bin/tool`` -> ``/data/current`` -> ``/usr/bin/true``, with
    ``/data`` another plugin's writable grant). Each hop is the link's own
    absolute path, with no link above it. A missing component ends the walk.
    """
    hops: list[str] = []
    parts = deque(path.split("/"))
    resolved = Path("/")
    while parts:
        part = parts.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = resolved.parent
            continue
        candidate = resolved / part
        try:
            info = candidate.lstat()
        except OSError:
            break
        if not stat.S_ISLNK(info.st_mode):
            resolved = candidate
            continue
        if len(hops) >= _MAX_LINKS:
            raise SandboxError(f"proc.exec program {path!r}: more than {_MAX_LINKS} links")
        hops.append(str(candidate))
        target = str(candidate.readlink())
        if target.startswith("/"):
            resolved = Path("/")
        parts.extendleft(reversed(target.split("/")))
    return tuple(hops)


def _interpreter(path: str) -> str | None:
    """The ELF interpreter (PT_INTERP) or the ``#!`` interpreter of ``path``, if any."""
    try:
        with os.fdopen(_open_regular(path), "rb") as handle:
            head = handle.read(4096)
            if head.startswith(b"#!"):
                # The kernel ends the interpreter's name at a NUL too (binfmt_script.c):
                # ``#!/bin/sh<NUL>...`` runs /bin/sh, where os.open raised ValueError.
                line = head[2:].split(b"\n", 1)[0].split(b"\0", 1)[0].strip().split()
                return os.fsdecode(line[0]) if line else None
            if not head.startswith(_ELF_MAGIC) or len(head) < 64:
                return None
            return _elf_interpreter(handle, head)
    except OSError as exc:
        raise SandboxError(f"cannot read proc.exec program {path!r}: {exc.strerror}") from exc
    except (ValueError, OverflowError) as exc:
        # An offset past what a file offset holds (seek: ValueError), read from a
        # malformed ELF header the kernel would refuse to run as well (round 17).
        raise SandboxError(
            f"cannot read proc.exec program {path!r}: its ELF header is malformed "
            f"({type(exc).__name__}); the kernel cannot run it either"
        ) from exc


def _check_runnable(path: str) -> None:
    """Refuse an interpreter the kernel could not run: one with no execute bit, or
    neither ELF nor a script.

    Whatever a ``#!`` line or PT_INTERP names is granted and bound into the jail
    at its path, readable there by the worker's uid: the approval of
    ``proc.exec:/opt/vendor/tool``, a script whose author wrote ``#!`` and the
    path of the operator's SSH key, put the key in the plugin's jail (red team
    round 17). A real interpreter is a program; that key is not.
    """
    with os.fdopen(_open_regular(path), "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        head = handle.read(4)
    if not mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH) or not (
        head.startswith((_ELF_MAGIC, b"#!"))
    ):
        raise SandboxError(
            f"proc.exec program {path!r} is not executable (an ELF program or a script "
            "with an execute bit), but a program's #! line or ELF header names it as its "
            "interpreter, which the jail would show the plugin: declare a program whose "
            "interpreter is a program"
        )


def _open_regular(path: str) -> int:
    """A descriptor reading ``path`` (links followed), which must be a regular file.

    A ``#!`` line or PT_INTERP names any path, read here in the host (as root
    on a root host) before anything else about it is checked: a FIFO blocked
    open(2) until a writer came, holding the enable (and the host's lifecycle
    lock, which every other enable and disable waits for) for good, and a
    device was opened, with whatever its open does (``/dev/tty`` read the
    operator's next line). So it is opened ``O_PATH`` first, which opens
    nothing (open(2)), checked, and only a regular file is opened for reading,
    through that descriptor: the same inode. The kernel runs nothing else
    anyway (execve(2): EACCES).
    """
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, device or socket"
            raise SandboxError(
                f"proc.exec program {path!r} is not a regular file ({kind}); a program and "
                "the interpreter its #! line or ELF header names must be regular files: "
                "declare the program itself"
            )
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    finally:
        os.close(fd)


def _elf_interpreter(handle: BinaryIO, head: bytes) -> str | None:
    """Read PT_INTERP from the program headers (ELF64 and ELF32, either endianness)."""
    is64 = head[4] == 2
    endian = "<" if head[5] == 1 else ">"
    if is64:
        phoff, phentsize, phnum = (
            struct.unpack_from(endian + "Q", head, 32)[0],
            struct.unpack_from(endian + "H", head, 54)[0],
            struct.unpack_from(endian + "H", head, 56)[0],
        )
    else:
        phoff, phentsize, phnum = (
            struct.unpack_from(endian + "I", head, 28)[0],
            struct.unpack_from(endian + "H", head, 42)[0],
            struct.unpack_from(endian + "H", head, 44)[0],
        )
    for index in range(min(phnum, 256)):
        handle.seek(phoff + index * phentsize)
        entry = handle.read(phentsize)
        if len(entry) < (56 if is64 else 32):
            return None
        if struct.unpack_from(endian + "I", entry, 0)[0] != _PT_INTERP:
            continue
        if is64:
            offset, size = struct.unpack_from(endian + "QxxxxxxxxxxxxxxxxQ", entry, 8)
        else:
            offset = struct.unpack_from(endian + "I", entry, 4)[0]
            size = struct.unpack_from(endian + "I", entry, 16)[0]
        handle.seek(offset)
        # A C string: the kernel reads it up to the first NUL (binfmt_elf.c).
        return os.fsdecode(handle.read(min(size, 4096)).split(b"\0", 1)[0])
    return None
