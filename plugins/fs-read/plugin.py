"""fs-read: read files under one configured base directory, and nothing else.

Every path goes through the path jail (pathjail.py: relative only, no
traversal, no dotfiles, no symbolic or hard links, opened component by
component without following links, canonical path re-checked), and the
sandbox grants the plugin ``fs.read`` on the base directory only, so the
kernel refuses whatever the jail might miss. Errors name paths relative to
the base, never the base itself.

A request the caller got wrong (a bad path, a file too large, binary data
read as text, a bad offset) raises a ``caplet.plugin.Refused`` subclass,
which the host does not count toward the circuit breaker; see README.md,
"Errors", for which errors count.
"""

from __future__ import annotations

import base64
import os
import stat as stat_module
from collections.abc import Callable, Mapping
from typing import Any

from pathjail import AccessRefused, IsADirectoryRefused, Jail, describe, read_exactly, show

from caplet.plugin import Refused

_KIB = 1024


class TooLargeRefused(Refused, ValueError):
    """``too large: ...``: above max_file_kb, or above max_read_kb for one call."""


class NotTextRefused(Refused, ValueError):
    """``not UTF-8 text: ...``: binary data asked for as text (the base64 functions read it)."""


class InvalidArgumentRefused(Refused, ValueError):
    """``invalid offset`` / ``invalid length``: an offset or length the call cannot use."""


def _integer(config: Mapping[str, Any], name: str) -> int:
    value = config[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"invalid configuration: {name} must be a non-negative integer")
    return value


def _offset(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentRefused(f"invalid {what}: must be a non-negative integer")
    return value


def _decode(data: bytes, at_end: bool, shown: str, offset: int) -> tuple[str, int]:
    """``data`` as UTF-8 text, and how many of its bytes that text is.

    A chunk that stops inside a multi-byte character is cut before it (the
    next chunk starts there), unless the file itself ends there.
    """
    try:
        return data.decode("utf-8"), len(data)
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and not at_end:
            if exc.start > 0:
                return data[: exc.start].decode("utf-8"), exc.start
            raise InvalidArgumentRefused(
                f"invalid length: the character at byte {offset} of '{shown}' is longer than "
                f"the {len(data)} bytes asked for; ask for at least 4"
            ) from None
        raise NotTextRefused(
            f"not UTF-8 text: '{shown}' at byte {offset + exc.start}; "
            "read it with read_file_base64 or read_file_chunk_base64"
        ) from None


def create_functions(config: Mapping[str, Any]) -> dict[str, dict[str, Callable[..., Any]]]:
    jail = Jail(config["root"])
    max_file = _integer(config, "max_file_kb") * _KIB
    max_read = _integer(config, "max_read_kb") * _KIB
    max_entries = _integer(config, "max_list_entries")

    def open_file(path: object) -> tuple[int, tuple[str, ...], int]:
        """A descriptor of the file ``path``, its parts and its size (within max_file_kb)."""
        parts = jail.parts(path)
        if not parts:
            raise IsADirectoryRefused("is a directory: '.'")
        with jail.directory(parts[:-1]) as directory:
            fd = jail.open_in(directory, parts, os.O_RDONLY)
        size = os.fstat(fd).st_size
        if size > max_file:
            os.close(fd)
            raise TooLargeRefused(
                f"too large: '{show(parts)}' is {size} bytes, above the {max_file // _KIB} KiB "
                "this plugin reads (max_file_kb)"
            )
        return fd, parts, size

    def whole(path: object) -> tuple[bytes, tuple[str, ...]]:
        fd, parts, size = open_file(path)
        try:
            if size > max_read:
                raise TooLargeRefused(
                    f"too large: '{show(parts)}' is {size} bytes, above the {max_read // _KIB} "
                    "KiB one call returns (max_read_kb); read it in pieces with read_file_chunk"
                )
            data = read_exactly(fd, max_read + 1)
        finally:
            os.close(fd)
        if len(data) > max_read:
            raise TooLargeRefused(f"too large: '{show(parts)}' grew while it was read")
        return data, parts

    def chunk(path: object, offset: object, length: object) -> tuple[bytes, dict[str, Any]]:
        start = _offset(offset, "offset")
        wanted = max_read if length is None else _offset(length, "length")
        wanted = min(wanted, max_read)
        fd, parts, size = open_file(path)
        try:
            data = read_exactly(fd, wanted, start)
        finally:
            os.close(fd)
        return data, {"path": show(parts), "offset": start, "size": size}

    def read_file(path: str) -> str:
        """The whole file as UTF-8 text."""
        data, parts = whole(path)
        text, _ = _decode(data, True, show(parts), 0)
        return text

    def read_file_base64(path: str) -> str:
        """The whole file, base64-encoded (for binary files)."""
        data, _ = whole(path)
        return base64.b64encode(data).decode("ascii")

    def read_file_chunk(path: str, offset: int = 0, length: int | None = None) -> dict[str, Any]:
        """At most ``length`` bytes (and max_read_kb) of text from byte ``offset``."""
        data, result = chunk(path, offset, length)
        at_end = result["offset"] + len(data) >= result["size"]
        text, used = _decode(data, at_end, result["path"], result["offset"])
        next_offset = result["offset"] + used
        return {
            **result,
            "content": text,
            "length": used,
            "next_offset": next_offset,
            "eof": next_offset >= result["size"],
        }

    def read_file_chunk_base64(
        path: str, offset: int = 0, length: int | None = None
    ) -> dict[str, Any]:
        """At most ``length`` bytes (and max_read_kb) from byte ``offset``, base64-encoded."""
        data, result = chunk(path, offset, length)
        next_offset = result["offset"] + len(data)
        return {
            **result,
            "content": base64.b64encode(data).decode("ascii"),
            "length": len(data),
            "next_offset": next_offset,
            "eof": next_offset >= result["size"],
        }

    def list_dir(path: str = ".") -> dict[str, Any]:
        """The entries of a directory: name, type and (for files) size; dotfiles are left out."""
        parts = jail.parts(path)
        entries: list[dict[str, Any]] = []
        with jail.directory(parts) as directory, os.scandir(directory) as scan:
            for entry in scan:
                if entry.name.startswith("."):
                    continue
                info = entry.stat(follow_symlinks=False)
                item: dict[str, Any] = {"name": entry.name, "type": describe(info.st_mode)}
                if stat_module.S_ISREG(info.st_mode):
                    item["size"] = info.st_size
                entries.append(item)
        entries.sort(key=lambda item: str(item["name"]))
        return {
            "path": show(parts),
            "entries": entries[:max_entries],
            "truncated": len(entries) > max_entries,
        }

    def stat(path: str) -> dict[str, Any]:
        """Type and size of a file or directory (no times: they are not needed and leak)."""
        parts = jail.parts(path)
        if not parts:
            return {"path": ".", "type": "directory"}
        with jail.directory(parts[:-1]) as directory:
            info = jail.lstat_in(directory, parts)
        if stat_module.S_ISLNK(info.st_mode):
            raise AccessRefused(
                f"access denied: '{show(parts)}' is a symbolic link; symlinks are not permitted"
            )
        result: dict[str, Any] = {"path": show(parts), "type": describe(info.st_mode)}
        if stat_module.S_ISREG(info.st_mode):
            result["size"] = info.st_size
        return result

    return {
        "fsread": {
            "read_file": read_file,
            "read_file_base64": read_file_base64,
            "read_file_chunk": read_file_chunk,
            "read_file_chunk_base64": read_file_chunk_base64,
            "list_dir": list_dir,
            "stat": stat,
        }
    }
