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
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant

__all__ = ["ProgramChain", "ProgramStep", "link_hops", "program_chain", "program_grants"]

_ELF_MAGIC = b"\x7fELF"
_PT_INTERP = 3
#: Links followed before giving up (the kernel's own limit, path_resolution(7)).
_MAX_LINKS = 40
#: Interpreters followed from a program (the kernel's BINPRM_MAX_RECURSION).
_MAX_INTERPRETERS = 4


@dataclass(frozen=True, slots=True)
class ProgramStep:
    """One file the kernel runs for a program: the program itself, or an interpreter
    the ``#!`` line or ELF header of the step before names; ``real`` is where its
    links lead (the same path when none)."""

    path: str
    real: str
    #: "program", "#!" (the step before is a script for it) or "ELF" (its loader).
    named_by: str


@dataclass(frozen=True, slots=True)
class ProgramChain:
    """A ``proc.exec`` program as the kernel would run it on this host: the file found
    and every interpreter after it, in order (what the jail binds, executable)."""

    steps: tuple[ProgramStep, ...]

    @property
    def grants(self) -> tuple[PathGrant, ...]:
        paths = (path for step in self.steps for path in (step.path, step.real))
        return tuple(PathGrant(path, executable=True) for path in dict.fromkeys(paths))

    def describe(self) -> str:
        """``/opt/t/tool, a script for /usr/bin/python3 (-> /usr/bin/python3.11), loaded
        by /lib64/ld-linux-x86-64.so.2``: what a person approving the program is shown,
        and what an approval pins (:mod:`caplet._host._program_reach`)."""
        role = {"program": "", "#!": "a script for ", "ELF": "loaded by "}
        return ", ".join(
            role[step.named_by]
            + step.path
            + (f" (-> {step.real})" if step.real != step.path else "")
            for step in self.steps
        )


def program_grants(program: str, *, search_path: str | None = None) -> tuple[PathGrant, ...]:
    """Executable grants for ``program``: :func:`program_chain`'s files."""
    return program_chain(program, search_path=search_path).grants


def program_chain(program: str, *, search_path: str | None = None) -> ProgramChain:
    """``program`` (a name searched on the absolute entries of ``search_path``,
    ``os.defpath`` when None, or a path) and its interpreters, as the kernel runs them.

    SandboxError when the program does not exist on the host: a capability
    that cannot be honoured is refused rather than silently dropped; and when
    the host cannot look it (or an interpreter it names) up at all, a name too
    long or a folder it may not search (attack22: OSError out of ``caplet
    info``, ``approve`` and ``host.enable``).
    """
    try:
        return _chain(program, search_path)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise SandboxError(
            f"proc.exec program {program!r} cannot be looked up on this host: "
            f"{where}{exc.strerror or exc}; declare a program this host can find and read"
        ) from exc


def _chain(program: str, search_path: str | None) -> ProgramChain:
    absolute = Path(program).is_absolute()
    searched = search_path if search_path is not None else os.defpath
    # Only the absolute entries: an empty or relative one (``PATH=$PATH:``, ``.``,
    # ``bin``) is the host's current directory, so a project the host runs in
    # would supply the approved program (red team round 17; Go's exec.LookPath
    # refuses the same, ErrDot). An empty search path searches nothing.
    found = program if absolute else _search(program, searched)
    if found is None or not Path(found).is_file():
        skipped = len(_absolute_entries(searched)) < len(searched.split(os.pathsep))
        raise SandboxError(
            f"proc.exec program {program!r} was not found on this host"
            + ("" if absolute else f" (searched PATH={searched})")
            + ("; relative entries of PATH are not searched" if skipped and not absolute else "")
            + "; install it or declare its absolute path"
        )
    _check_runnable(found, interpreter=False)
    steps = [ProgramStep(found, os.path.realpath(found), "program")]
    # A script's interpreter is itself a program with an ELF interpreter, which
    # the kernel opens for execution too (Landlock checks that open: a
    # ``#!/bin/sh`` script failed with EACCES on ld.so). Follow the chain as
    # far as the kernel does (BINPRM_MAX_RECURSION, 4, in fs/exec.c).
    for _ in range(_MAX_INTERPRETERS):
        named = _interpreter(steps[-1].real)
        if named is None:
            break
        interpreter, kind, line = named
        _refuse_relative(steps[-1].path, interpreter, kind)
        _check_runnable(interpreter)
        if kind == "#!":
            _refuse_path_lookup(steps[-1].path, interpreter, line, searched)
        steps.append(ProgramStep(interpreter, os.path.realpath(interpreter), kind))
    return ProgramChain(tuple(steps))


def _absolute_entries(searched: str) -> list[str]:
    return [entry for entry in searched.split(os.pathsep) if Path(entry).is_absolute()]


def _search(program: str, searched: str) -> str | None:
    entries = _absolute_entries(searched)
    return shutil.which(program, path=os.pathsep.join(entries)) if entries else None


def _refuse_relative(program: str, interpreter: str, kind: str) -> None:
    """Refuse an interpreter named by a relative path.

    The kernel opens it relative to the current directory of whoever runs the
    program (open_exec in fs/exec.c), so here it was the *host's* current
    directory that supplied it: run in a cloned project, ``#!bin/helper``
    granted the project's ``./bin/helper``, bound executable into the jail
    under its relative name (red team round 19; the same slip as a relative
    ``PATH`` entry, round 17).
    """
    if Path(interpreter).is_absolute():
        return
    where = "#! line" if kind == "#!" else "ELF header (PT_INTERP)"
    raise SandboxError(
        f"proc.exec program {program!r} names its interpreter {interpreter!r} by a relative "
        f"path in its {where}, which is found in the current directory of whoever runs it "
        "(this host's, here), not where the program is; write the interpreter's absolute "
        "path"
    )


#: Programs that run the command they are given by looking it up on ``PATH`` (execvp),
#: as a script's ``#!`` interpreter: ``#!/usr/bin/nice python3`` is ``#!/usr/bin/env
#: python3`` by another name (attack21). Not busybox: ``#!/bin/busybox sh`` runs an
#: applet of its own, no PATH lookup.
_PATH_LAUNCHERS: Final = frozenset(
    {
        "env",
        "nice",
        "nohup",
        "setsid",
        "ionice",
        "time",
        "unshare",
        "prlimit",
        "stdbuf",
        "timeout",
        "chrt",
        "taskset",
        "flock",
        "nsenter",
        "setpriv",
        "runuser",
        "sudo",
        "doas",
        "strace",
        "ltrace",
        "valgrind",
        "catchsegv",
        "xargs",
    }
)


def _refuse_path_lookup(script: str, interpreter: str, line: str, searched: str) -> None:
    """Refuse a script whose ``#!`` line runs ``env NAME`` (or another launcher's).

    env(1) looks NAME up on ``PATH`` when the script runs, inside the jail, so
    which program that is neither shows in the approval nor is bound there
    (red team round 19: ``#!/usr/bin/env python3`` was granted env and failed
    in the jail with EACCES, or, bound by another grant, ran whatever the
    jail's PATH found first). Resolving NAME here would pin a program the
    script does not name; the author's fix is one line.
    """
    names = {Path(interpreter).name, Path(os.path.realpath(interpreter)).name}
    if not names & _PATH_LAUNCHERS:
        return
    words = line.split()
    name = next((word for word in words[1:] if not word.startswith("-")), "")
    here = _search(name, searched) if name and "/" not in name else None
    example = f"#!{here}" if here else "#!/usr/bin/python3"
    raise SandboxError(
        f"proc.exec program {script!r} is a script whose first line is {('#!' + line)!r}: "
        f"{interpreter} looks {name or 'its program'!r} up on PATH when the script runs, "
        "inside the jail, so the program it runs would be neither shown in the approval "
        "nor bound in the jail; write the interpreter's absolute path in the #! line "
        f"({example} on this host)"
    )


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


def _interpreter(path: str) -> tuple[str, str, str] | None:
    """The ELF interpreter (PT_INTERP) or the ``#!`` interpreter of ``path``, if any:
    its path, which of the two named it, and the ``#!`` line after ``#!``."""
    try:
        with os.fdopen(_open_regular(path), "rb") as handle:
            head = handle.read(4096)
            if head.startswith(b"#!"):
                # The kernel ends the interpreter's name at a NUL too (binfmt_script.c):
                # ``#!/bin/sh<NUL>...`` runs /bin/sh, where os.open raised ValueError.
                line = head[2:].split(b"\n", 1)[0].split(b"\0", 1)[0].strip()
                words = line.split()
                return (os.fsdecode(words[0]), "#!", os.fsdecode(line)) if words else None
            if not head.startswith(_ELF_MAGIC) or len(head) < 64:
                return None
            elf = _elf_interpreter(handle, head)
            return None if elf is None else (elf, "ELF", "")
    except OSError as exc:
        raise SandboxError(f"cannot read proc.exec program {path!r}: {exc.strerror}") from exc
    except (ValueError, OverflowError) as exc:
        # An offset past what a file offset holds (seek: ValueError), read from a
        # malformed ELF header the kernel would refuse to run as well (round 17).
        raise SandboxError(
            f"cannot read proc.exec program {path!r}: its ELF header is malformed "
            f"({type(exc).__name__}); the kernel cannot run it either"
        ) from exc


def _check_runnable(path: str, *, interpreter: bool = True) -> None:
    """Refuse a program or an interpreter the kernel could not run: one with no
    execute bit, or neither ELF nor a script.

    Whatever a ``#!`` line or PT_INTERP names is granted and bound into the jail
    at its path, readable there by the worker's uid: the approval of
    ``proc.exec:/opt/vendor/tool``, a script whose author wrote ``#!`` and the
    path of the operator's SSH key, put the key in the plugin's jail (red team
    round 17). A real interpreter is a program; that key is not. The same held
    for the program itself (round 19): ``proc.exec:~/.ssh/id_ed25519`` gave the
    plugin the key to read, and ``proc.exec:`` of caplet's own database every
    plugin's ``ctx.kv`` on a user's host, where the worker has caplet's uid.
    """
    with os.fdopen(_open_regular(path), "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        head = handle.read(4)
    if not mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH) or not (
        head.startswith((_ELF_MAGIC, b"#!"))
    ):
        if not interpreter:
            raise SandboxError(
                f"proc.exec program {path!r} is not executable (an ELF program or a script "
                "with an execute bit): the kernel cannot run it, and the jail would only "
                "show it to the plugin, readable; declare a program"
            )
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
