"""Paths and names given on the command line, checked before anything uses them (issue 13).

A path the operating system cannot take at all (a NUL byte, a component
longer than the file system's name limit, more than ``PATH_MAX`` bytes)
makes ``pathlib`` raise from ``exists()`` and ``is_dir()`` as much as from
``open()``, in whichever part of caplet touches it first. Checked once
here, it is a usage error naming the option (exit 2) instead.

The limits are Linux's ``NAME_MAX`` (255 bytes) and ``PATH_MAX`` (4096
bytes, the terminating NUL included), limits.h. ``os.pathconf`` would give
the exact value per file system, but only for a path that exists.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, TypeVar

import typer

__all__ = ["usable_path", "usable_text"]

NAME_MAX: Final = 255
PATH_MAX: Final = 4096

_P = TypeVar("_P", Path, Path | None)
_T = TypeVar("_T", str, str | None)


def usable_path(value: _P) -> _P:
    """``value``, or :class:`typer.BadParameter` saying why no system call could use it."""
    if value is None:
        return value
    try:
        raw = os.fsencode(value)
    except UnicodeEncodeError as exc:
        raise typer.BadParameter(
            "the path is not valid text for the file system (an unpaired surrogate); "
            "pass it as the shell gives it"
        ) from exc
    if b"\0" in raw:
        raise typer.BadParameter("the path contains a NUL byte, which no file name can hold")
    if len(raw) >= PATH_MAX:
        raise typer.BadParameter(
            f"the path is {len(raw)} bytes long; the system's limit is {PATH_MAX - 1}"
        )
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        shown = os.fsdecode(longest[:40])
        raise typer.BadParameter(
            f"a name in the path ({shown!r}..., {len(longest)} bytes) is longer than the "
            f"file system's limit of {NAME_MAX} bytes; use a shorter name"
        )
    return value


def usable_text(value: _T) -> _T:
    """``value`` unless it holds an unpaired surrogate: Python's stand-in for argument
    bytes that are not UTF-8, which no name caplet knows contains, and which SQLite and
    every encoder refuse with a UnicodeEncodeError."""
    if value is None:
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise typer.BadParameter(
            f"{value[: exc.start]!r} is followed by bytes that are not UTF-8 text; check the "
            "terminal's or the script's encoding"
        ) from exc
    return value
