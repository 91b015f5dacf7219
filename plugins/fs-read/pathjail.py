"""The path jail of caplet's reference file plugins (fs-read and fs-write).

Each plugin ships an identical copy of this file (a plugin is hashed,
audited and approved as one folder, so it cannot import code from a sibling
folder; caplet's test suite keeps the copies byte for byte equal).

A path given by a caller is checked here before any file is touched:

1. a non-empty string of valid Unicode text (no lone surrogates), without
   NUL, at most 4096 characters;
2. relative: it is resolved against the configured base directory, never
   against the working directory, and absolute paths are refused (accepting
   one that happens to lie inside the base would let a caller probe where
   the base is);
3. no ``..`` component (traversal) and no component starting with ``.``
   (dotfiles such as ``.env``, ``.git`` or ``.ssh``) anywhere inside the jail;
4. opened component by component from the base with ``O_NOFOLLOW`` and
   ``dir_fd``, so a symbolic link is refused on the target and on every
   ancestor, and nothing is resolved by path a second time;
5. the canonical path of what was opened is re-checked: it must be the base
   plus exactly the components given, and name the very file that was opened;
6. regular files with more than one hard link are refused (a hard link can
   make a file outside the base reachable from inside it).

Every error message names the path relative to the base, never the base
itself. A path the caller got wrong is refused with a ``caplet.plugin.Refused``
subclass (:class:`InvalidPathRefused`, :class:`AccessRefused`,
:class:`NotFoundRefused` ...), which the host does not count toward the
plugin's circuit breaker: a caller sending bad paths is not the plugin
failing, and must not get it quarantined. Each also subclasses the built-in
error it replaces (``ValueError``, ``PermissionError``, ``FileNotFoundError``
...), so ``except`` clauses written for those still work. What the caller
cannot have caused (the base directory unusable, a read-only or full file
system, EIO) stays a plain ``OSError`` and counts.

The kernel jail (the sandbox's mounts and Landlock) enforces the same base
directory underneath all of this: these checks give callers clear errors and
close the escapes a mount cannot see (symlinks and hard links inside the
base).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from caplet.plugin import Refused

__all__ = [
    "MAX_PATH_CHARS",
    "AccessRefused",
    "AlreadyExistsRefused",
    "InvalidPathRefused",
    "IsADirectoryRefused",
    "Jail",
    "NameTooLongRefused",
    "NotADirectoryRefused",
    "NotFoundRefused",
    "describe",
    "read_exactly",
    "show",
    "write_all",
]

#: The longest path accepted (Linux PATH_MAX).
MAX_PATH_CHARS = 4096
#: How much of a caller's path an error message repeats.
_SHOWN_CHARS = 200

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# The refusals: the host only sees the class name, which must end in "Refused".


class InvalidPathRefused(Refused, ValueError):
    """``invalid path: ...``: not a usable relative path (empty, NUL, too long, absolute ...)."""


class AccessRefused(Refused, PermissionError):
    """``access denied: ...``: traversal, a dotfile, a link, a hard link, not a regular file,
    or the kernel's EACCES/EPERM on a path inside the base."""


class NotFoundRefused(Refused, FileNotFoundError):
    """``not found: ...``: the caller named something that is not there."""


class AlreadyExistsRefused(Refused, FileExistsError):
    """``already exists: ...``: the caller asked to create something that is there."""


class NotADirectoryRefused(Refused, NotADirectoryError):
    """``not a directory: ...``: a file used as a directory in the path."""


class IsADirectoryRefused(Refused, IsADirectoryError):
    """``is a directory: ...``: a directory where the call needs a file."""


class NameTooLongRefused(Refused, OSError):
    """``cannot access 'x': File name too long``: a component longer than the file system takes
    (ENAMETOOLONG). Other "cannot access" errors (EIO ...) are failures, not refusals."""


def describe(mode: int) -> str:
    """The kind of file ``mode`` describes: file, directory, symlink or other."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def read_exactly(fd: int, limit: int, offset: int = 0) -> bytes:
    """Read up to ``limit`` bytes of ``fd`` from ``offset`` (fewer only at the end)."""
    pieces: list[bytes] = []
    left = limit
    while left > 0:
        piece = os.pread(fd, min(left, 1 << 20), offset)
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
        offset += len(piece)
    return b"".join(pieces)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Jail:
    """Paths under one base directory, checked and opened without following links."""

    __slots__ = ("_real_root", "_root")

    def __init__(self, root: object) -> None:
        if not isinstance(root, str) or not os.path.isabs(root):
            raise ValueError("invalid configuration: root must be an absolute path")
        self._root = os.path.normpath(root)
        # The base as the kernel sees it: the canonical path of every file
        # opened through the jail must start with it.
        self._real_root = os.path.realpath(self._root)

    # -- checking ------------------------------------------------------------------------

    def parts(self, path: object) -> tuple[str, ...]:
        """The components of ``path`` under the base; ``()`` is the base itself."""
        if not isinstance(path, str) or not path:
            raise InvalidPathRefused("invalid path: must be a non-empty string")
        if "\0" in path:
            raise InvalidPathRefused("invalid path: contains a NUL character")
        if not path.isascii():
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                # A lone surrogate: os calls would raise UnicodeEncodeError, or
                # (surrogateescape) name raw bytes that are not text at all.
                raise InvalidPathRefused(
                    "invalid path: not valid Unicode text (it holds a lone surrogate)"
                ) from None
        if len(path) > MAX_PATH_CHARS:
            raise InvalidPathRefused(
                f"invalid path: {len(path)} characters, more than the {MAX_PATH_CHARS} allowed"
            )
        if path.startswith("/"):
            raise InvalidPathRefused(
                "invalid path: absolute paths are not accepted; give a path relative to the "
                "base directory, such as 'notes/todo.md'"
            )
        parts = tuple(part for part in path.split("/") if part not in ("", "."))
        for index, part in enumerate(parts):
            shown = show(parts[: index + 1])
            if part == "..":
                raise AccessRefused(
                    f"access denied: '{shown}': '..' (path traversal) is not permitted"
                )
            if part.startswith("."):
                raise AccessRefused(f"access denied: '{shown}': dotfiles are not permitted")
        return parts

    # -- opening -------------------------------------------------------------------------

    @contextmanager
    def directory(self, parts: tuple[str, ...]) -> Iterator[int]:
        """A descriptor of the directory ``parts`` (checked), closed on exit."""
        fd = self._open_root()
        try:
            for index, part in enumerate(parts):
                child = self._step(fd, parts[: index + 1], part)
                os.close(fd)
                fd = child
            self.recheck(parts, fd)
            yield fd
        finally:
            os.close(fd)

    def open_in(self, directory: int, parts: tuple[str, ...], flags: int, mode: int = 0o600) -> int:
        """Open the last of ``parts`` inside ``directory`` (its parent) without following it.

        Refuses symbolic links, anything but a regular file, and files with
        more than one hard link; then re-checks the canonical path.
        """
        name = parts[-1]
        try:
            before = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            pass  # it may be about to be created (O_CREAT | O_EXCL)
        except OSError as exc:
            raise self.error(exc, parts) from None
        else:
            # Checked before opening too: opening a device or a FIFO can have effects.
            if stat.S_ISLNK(before.st_mode):
                raise self.error(OSError(errno.ELOOP, "link"), parts)
            if not stat.S_ISREG(before.st_mode):
                raise self._wrong_kind(parts, before.st_mode)
        flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(name, flags, mode, dir_fd=directory)
        except OSError as exc:
            raise self._failure(exc, directory, parts) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._wrong_kind(parts, info.st_mode)
            if info.st_nlink > 1:
                raise AccessRefused(
                    f"access denied: '{show(parts)}' has {info.st_nlink} hard links; "
                    "hard-linked files are not permitted"
                )
            self.recheck(parts, fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lstat_in(self, directory: int, parts: tuple[str, ...]) -> os.stat_result:
        """The status of the last of ``parts`` inside ``directory``, not following links."""
        try:
            return os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
        except OSError as exc:
            raise self.error(exc, parts) from None

    def recheck(self, parts: tuple[str, ...], fd: int) -> None:
        """The canonical path of ``parts`` must be the base plus ``parts`` and name ``fd``."""
        expected = os.path.join(self._real_root, *parts)
        canonical = os.path.realpath(os.path.join(self._root, *parts))
        changed = AccessRefused(
            f"access denied: '{show(parts)}' does not resolve to itself inside the base "
            "directory (a link, or it changed while it was opened)"
        )
        if canonical != expected:
            raise changed
        try:
            by_path = os.stat(canonical, follow_symlinks=False)
        except OSError:
            raise changed from None
        opened = os.fstat(fd)
        if (by_path.st_dev, by_path.st_ino) != (opened.st_dev, opened.st_ino):
            raise changed

    # -- errors --------------------------------------------------------------------------

    def error(self, exc: OSError, parts: tuple[str, ...]) -> OSError:
        """``exc`` as an error naming only the relative path (never the base).

        A refusal when the path explains it (the caller's mistake); a plain
        OSError, which the breaker counts, when the system failed: a full
        disk or an unexpected error such as EIO.
        """
        shown = show(parts)
        code = exc.errno
        if code == errno.ENOENT:
            return NotFoundRefused(f"not found: '{shown}'")
        if code == errno.EEXIST:
            return AlreadyExistsRefused(f"already exists: '{shown}'")
        if code == errno.ENOTDIR:
            return NotADirectoryRefused(f"not a directory: '{shown}'")
        if code == errno.EISDIR:
            return IsADirectoryRefused(f"is a directory: '{shown}'")
        if code == errno.ELOOP:
            return AccessRefused(
                f"access denied: '{shown}' is a symbolic link; symlinks are not permitted"
            )
        if code in (errno.EACCES, errno.EPERM):
            return AccessRefused(f"access denied: '{shown}'")
        if code == errno.EROFS:
            # The whole file system is read-only: no path of the caller's can
            # fix that, every write fails until the administrator does.
            return PermissionError(f"access denied: '{shown}'")
        if code in (errno.ENOSPC, errno.EDQUOT):
            return OSError(f"no space left: '{shown}'")
        reason = os.strerror(code) if code is not None else type(exc).__name__
        if code == errno.ENAMETOOLONG:
            return NameTooLongRefused(f"cannot access '{shown}': {reason}")
        return OSError(f"cannot access '{shown}': {reason}")

    def _open_root(self) -> int:
        # Not a refusal: no path of the caller's can fix it, every call fails
        # until the administrator does, which is what the breaker is for.
        try:
            return os.open(self._root, _DIR_FLAGS)
        except OSError as exc:
            raise OSError(
                "the base directory cannot be opened "
                f"({os.strerror(exc.errno) if exc.errno else 'error'}); check the plugin's "
                "root setting"
            ) from None

    def _step(self, fd: int, parts: tuple[str, ...], name: str) -> int:
        """Open directory ``name`` inside ``fd``; refuses links."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise self._failure(exc, fd, parts) from None

    def _failure(self, exc: OSError, directory: int, parts: tuple[str, ...]) -> OSError:
        """Classify a failed open by what is really there (a link says ELOOP or ENOTDIR)."""
        try:
            info = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
        except OSError:
            return self.error(exc, parts)
        if stat.S_ISLNK(info.st_mode):
            return self.error(OSError(errno.ELOOP, "link"), parts)
        return self.error(exc, parts)

    def _wrong_kind(self, parts: tuple[str, ...], mode: int) -> OSError:
        if stat.S_ISDIR(mode):
            return IsADirectoryRefused(f"is a directory: '{show(parts)}'")
        return AccessRefused(
            f"access denied: '{show(parts)}' is not a regular file ({describe(mode)})"
        )


def show(parts: tuple[str, ...]) -> str:
    """``parts`` as a relative path for messages ('.' for the base), cut if very long."""
    text = "/".join(parts) or "."
    if len(text) > _SHOWN_CHARS:
        return text[: _SHOWN_CHARS - 3] + "..."
    return text
