"""fs-write: create, overwrite and append files under one configured base directory.

The companion of fs-read (which it requires): this plugin writes and never
reads back or deletes. Every path goes through the same path jail as
fs-read (pathjail.py: relative only, no traversal, no dotfiles, no symbolic
or hard links, opened component by component without following links,
canonical path re-checked); the sandbox grants ``fs.write`` on the base
directory only, so the kernel refuses whatever the jail might miss.
Sizes are limited per call and per file, and the number of files and
directories it may create is a budget kept in the plugin's ``ctx.kv`` (so
it holds across restarts); overwriting or appending to an existing file
does not spend it.

A request the caller got wrong (a bad path, too much data, invalid base64,
a spent entry budget) raises a ``caplet.plugin.Refused`` subclass, which the
host does not count toward the circuit breaker; a full disk or an
unexpected OSError counts (README.md, "Errors").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from pathjail import (
    AlreadyExistsRefused,
    IsADirectoryRefused,
    Jail,
    describe,
    show,
    write_all,
)

from caplet.plugin import PluginContext, Refused

_KIB = 1024


class TooLargeRefused(Refused, ValueError):
    """``too large: ...``: above max_write_kb for one call, or max_file_kb for the file."""


class InvalidDataRefused(Refused, ValueError):
    """``invalid data: not valid base64``."""


class WrongTypeRefused(Refused, TypeError):
    """``invalid content`` / ``invalid data``: not a string (the declared schema already
    refuses that; this is the plugin's own check behind it)."""


class EntryLimitRefused(Refused, PermissionError):
    """``entry limit reached: ...``: max_entries new files and directories already created."""


def _integer(config: Mapping[str, Any], name: str) -> int:
    value = config[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"invalid configuration: {name} must be a non-negative integer")
    return value


def _text(content: object) -> bytes:
    if not isinstance(content, str):
        raise WrongTypeRefused(f"invalid content: must be a string, got {type(content).__name__}")
    return content.encode("utf-8")


def create_functions(config: Mapping[str, Any]) -> dict[str, dict[str, Callable[..., Any]]]:
    root = config["root"]
    jail = Jail(root)
    max_write = _integer(config, "max_write_kb") * _KIB
    max_file = _integer(config, "max_file_kb") * _KIB
    max_entries = _integer(config, "max_entries")
    # One budget per base directory: the key names a digest of it, never the path.
    budget_key = "entries_created:" + hashlib.sha256(str(root).encode()).hexdigest()[:32]

    def binary(data: object) -> bytes:
        if not isinstance(data, str):
            raise WrongTypeRefused(
                f"invalid data: must be a base64 string, got {type(data).__name__}"
            )
        if len(data) > (max_write // 3 + 1) * 4:
            raise TooLargeRefused(
                f"too large: more than the {max_write // _KIB} KiB one call writes (max_write_kb)"
            )
        try:
            return base64.b64decode(data, validate=True)
        except binascii.Error:
            raise InvalidDataRefused("invalid data: not valid base64") from None

    def reserve(ctx: PluginContext, parts: tuple[str, ...]) -> int:
        """The entries created so far; refuses when the budget is spent."""
        used = ctx.kv.get(budget_key, 0)
        if isinstance(used, bool) or not isinstance(used, int) or used < 0:
            used = max_entries  # an unreadable count fails closed
        if used >= max_entries:
            raise EntryLimitRefused(
                f"entry limit reached: '{show(parts)}' would be new, and {used} of "
                f"{max_entries} new files and directories (max_entries) are already created; "
                "overwrite or append to existing files instead"
            )
        return used

    def put(ctx: PluginContext, path: object, data: bytes, *, append: bool) -> dict[str, Any]:
        parts = jail.parts(path)
        if not parts:
            raise IsADirectoryRefused("is a directory: '.'")
        shown = show(parts)
        if len(data) > max_write:
            raise TooLargeRefused(
                f"too large: {len(data)} bytes for '{shown}', above the {max_write // _KIB} KiB "
                "one call writes (max_write_kb)"
            )
        if len(data) > max_file:
            raise TooLargeRefused(
                f"too large: {len(data)} bytes for '{shown}', above the {max_file // _KIB} KiB "
                "a file may hold (max_file_kb)"
            )
        mode = os.O_WRONLY | (os.O_APPEND if append else 0)
        created = False
        with jail.directory(parts[:-1]) as directory:
            try:
                fd = jail.open_in(directory, parts, mode)
            except FileNotFoundError:
                used = reserve(ctx, parts)
                fd = jail.open_in(directory, parts, mode | os.O_CREAT | os.O_EXCL)
                created = True
                ctx.kv.set(budget_key, used + 1)
        try:
            size = os.fstat(fd).st_size if append else 0
            if size + len(data) > max_file:
                raise TooLargeRefused(
                    f"too large: '{shown}' would hold {size + len(data)} bytes, above the "
                    f"{max_file // _KIB} KiB a file may hold (max_file_kb)"
                )
            if not append:
                os.ftruncate(fd, 0)
            write_all(fd, data)
        except OSError as exc:
            raise jail.error(exc, parts) from None
        finally:
            os.close(fd)
        return {"path": shown, "bytes": len(data), "size": size + len(data), "created": created}

    def write_file(ctx: PluginContext, path: str, content: str) -> dict[str, Any]:
        """Create or overwrite a file with UTF-8 text; the parent directory must exist."""
        return put(ctx, path, _text(content), append=False)

    def write_file_base64(ctx: PluginContext, path: str, data: str) -> dict[str, Any]:
        """Create or overwrite a file with base64-encoded bytes."""
        return put(ctx, path, binary(data), append=False)

    def append_file(ctx: PluginContext, path: str, content: str) -> dict[str, Any]:
        """Append UTF-8 text to a file, creating it if missing."""
        return put(ctx, path, _text(content), append=True)

    def append_file_base64(ctx: PluginContext, path: str, data: str) -> dict[str, Any]:
        """Append base64-encoded bytes to a file, creating it if missing."""
        return put(ctx, path, binary(data), append=True)

    def mkdir(ctx: PluginContext, path: str) -> dict[str, Any]:
        """Create one directory (its parent must exist)."""
        parts = jail.parts(path)
        if not parts:
            raise AlreadyExistsRefused("already exists: '.'")
        with jail.directory(parts[:-1]) as directory:
            try:
                info = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise jail.error(exc, parts) from None
            else:
                raise AlreadyExistsRefused(
                    f"already exists: '{show(parts)}' ({describe(info.st_mode)})"
                )
            used = reserve(ctx, parts)
            try:
                os.mkdir(parts[-1], 0o700, dir_fd=directory)
            except OSError as exc:
                raise jail.error(exc, parts) from None
            ctx.kv.set(budget_key, used + 1)
        return {"path": show(parts), "created": True}

    return {
        "fswrite": {
            "write_file": write_file,
            "write_file_base64": write_file_base64,
            "append_file": append_file,
            "append_file_base64": append_file_base64,
            "mkdir": mkdir,
        }
    }
