"""Find a plugin's manifest and parse it into plain data (TOML or JSON).

Only the file's syntax is checked here: its size, encoding, a table at the
top level. What the fields mean is :mod:`caplet._manifest._schema`'s job,
building the manifest :mod:`caplet._manifest._load`'s.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from caplet._atomic import NotRegularFileError, read_regular
from caplet._config._coerce import type_name
from caplet._errors import ManifestError
from caplet._manifest._names import MANIFEST_NAMES
from caplet._toml import TomlLimitError, parse_toml

__all__ = ["MAX_MANIFEST_BYTES", "find_manifest", "read_manifest_data"]

#: A manifest is a few kilobytes; refuse anything absurd before parsing it.
MAX_MANIFEST_BYTES = 1024 * 1024

_TOML_POSITION_RE = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")


# -- locating and parsing -----------------------------------------------------------


def find_manifest(plugin_dir: Path) -> Path:
    """The manifest file of ``plugin_dir``: ``plugin.toml`` or ``plugin.json``.

    Raises :class:`ManifestError` when the directory is missing, holds
    neither or both, or the manifest is not a regular file (a symlink could
    point anywhere outside the plugin tree that was hashed).
    """
    if not plugin_dir.is_dir():
        raise ManifestError(
            f"{plugin_dir}: not a plugin directory (missing or not a directory); pass the "
            f"directory that holds {' or '.join(MANIFEST_NAMES)}",
            path=str(plugin_dir),
        )
    present = [plugin_dir / name for name in MANIFEST_NAMES if os.path.lexists(plugin_dir / name)]
    if not present:
        raise ManifestError(
            f"{plugin_dir}: no manifest found; expected {' or '.join(MANIFEST_NAMES)} in "
            f"this directory",
            path=str(plugin_dir),
        )
    if len(present) > 1:
        raise ManifestError(
            f"{plugin_dir}: has both {' and '.join(MANIFEST_NAMES)}; keep one",
            path=str(plugin_dir),
        )
    path = present[0]
    if not stat.S_ISREG(path.lstat().st_mode):
        raise ManifestError(
            f"{path}: must be a regular file (not a symlink or directory); replace it with "
            f"the manifest itself",
            path=str(path),
        )
    return path


def read_manifest_data(path: Path, hashed: bytes | None = None) -> dict[str, Any]:
    """Parse the manifest into plain data; the top level must be a table/object.

    *hashed*: the manifest's bytes as a tree hash read them
    (:func:`caplet._trust._hashing.tree_hash_keeping`), parsed instead of
    reading the file again, so the manifest is that content's.
    """
    try:
        raw = _read_regular(path) if hashed is None else _bounded(path, hashed)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ManifestError(
            f"{path}: cannot read the manifest ({exc.strerror or exc}); check that the file "
            f"is readable",
            path=str(path),
        ) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not valid UTF-8 (byte {exc.start}); save the manifest as UTF-8",
            path=str(path),
        ) from exc
    data = _parse_json(path, text) if path.suffix == ".json" else _parse_toml(path, text)
    if not isinstance(data, dict):
        raise ManifestError(
            f"{path}: the manifest must be an object/table at the top level, got {type_name(data)}",
            path=str(path),
        )
    return data


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path``, a regular file of at most :data:`MAX_MANIFEST_BYTES`.

    :func:`find_manifest` checked the name with lstat, and whoever can write
    the plugin folder may swap it for a link or a FIFO before it is read
    (attack10); :func:`read_regular` asks again of the descriptor it reads.
    """
    try:
        data = read_regular(path, MAX_MANIFEST_BYTES)
    except NotRegularFileError:
        raise ManifestError(
            f"{path}: must be a regular file (not a symlink or directory); replace it with "
            f"the manifest itself",
            path=str(path),
        ) from None
    return _bounded(path, data)


def _bounded(path: Path, data: bytes) -> bytes:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{path}: manifest is more than the limit of {MAX_MANIFEST_BYTES} bytes; a "
            "manifest only declares metadata",
            path=str(path),
        )
    return data


def _parse_toml(path: Path, text: str) -> object:
    try:
        return parse_toml(text)
    except TomlLimitError as exc:
        raise ManifestError(f"{path}: invalid TOML: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError has no lineno attribute: the position
        # is only in the message, "... (at line 3, column 7)".
        message = str(exc)
        match = _TOML_POSITION_RE.match(message)
        if match is None:
            where, what = "", message
        else:
            where, what = f":{match['line']}:{match['col']}", match["msg"]
        raise ManifestError(
            f"{path}{where}: invalid TOML: {what}; fix the syntax there "
            f"(https://toml.io/en/v1.0.0)",
            path=str(path),
        ) from exc
    except RecursionError as exc:
        raise ManifestError(f"{path}: invalid TOML: nested too deeply", path=str(path)) from exc


def _parse_json(path: Path, text: str) -> object:
    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ManifestError(
                    f"{path}: duplicate key {key!r} in a JSON object; keep one",
                    path=str(path),
                    field=key,
                )
            result[key] = value
        return result

    def refuse_constant(name: str) -> Any:
        raise ManifestError(
            f"{path}: {name} is not valid JSON; write a finite number", path=str(path)
        )

    try:
        return json.loads(text, object_pairs_hook=pairs_hook, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno}); fix the syntax there",
            path=str(path),
        ) from exc
    except RecursionError as exc:
        raise ManifestError(f"{path}: invalid JSON: nested too deeply", path=str(path)) from exc
