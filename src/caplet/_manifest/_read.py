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
from caplet._display import safe_line
from caplet._errors import ManifestError
from caplet._manifest._names import MANIFEST_NAMES
from caplet._toml import TomlLimitError, parse_toml

__all__ = ["MAX_MANIFEST_BYTES", "find_manifest", "read_manifest_data"]

#: A manifest is a few kilobytes; refuse anything absurd before parsing it.
MAX_MANIFEST_BYTES = 1024 * 1024

#: The 64-bit range TOML's integers have, for a JSON manifest's too.
_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
#: "-9223372036854775808": longer text is out of range whatever its digits.
_MAX_INT_DIGITS = 20
#: A lone surrogate: a JSON escape's half pair (PEP 383's escapes are surrogates too).
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

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
    _check_text(path, data)
    return data


def _check_text(path: Path, data: dict[str, Any]) -> None:
    """Refuse a lone surrogate in any key or string of the manifest.

    UTF-8 holds none, but JSON's ``\\ud800`` escape puts one in a ``str``, and
    every field took it: nothing can encode such text as UTF-8, so whatever
    carried a description out of the process raised, far from the manifest
    (attack29: ``caplet mcp`` answered every ``tools/list`` with the encoder's
    traceback, no tool of any plugin listed). TOML refuses the escape itself.
    Iterative: the depth is the parser's, already bounded.
    """
    pending: list[tuple[str, object]] = [("", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _has_surrogate(key):
                    _refuse_surrogate(path, where or "the top level", key)
                pending.append((name, item))
        elif isinstance(value, list):
            pending.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str) and _has_surrogate(value):
            _refuse_surrogate(path, where, value)


def _has_surrogate(text: str) -> bool:
    return _SURROGATE_RE.search(text) is not None


def _refuse_surrogate(path: Path, field: str, text: str) -> None:
    shown = safe_line(text[:80].encode("ascii", "backslashreplace").decode("ascii"))
    raise ManifestError(
        f"{path}: {safe_line(field)}: '{shown}' holds a lone surrogate "
        "(a \\uD800-\\uDFFF escape that is half of a pair), which no UTF-8 text can; write "
        "the character itself, or both halves of its pair",
        path=str(path),
        field=field,
    )


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

    def bounded_int(digits: str) -> int:
        # int() of more than sys.get_int_max_str_digits() digits raises a ValueError that
        # is no JSONDecodeError (attack29: it stopped `caplet list` for every plugin); no
        # manifest field takes more than 64 bits, as in TOML.
        value = int(digits) if len(digits) <= _MAX_INT_DIGITS else None
        if value is None or not _INT_MIN <= value <= _INT_MAX:
            raise ManifestError(
                f"{path}: the integer {digits[:24]}{'...' if len(digits) > 24 else ''} "
                f"({len(digits)} characters) is outside the 64-bit range (-2**63 to "
                "2**63-1) no manifest field goes past; write a smaller number",
                path=str(path),
            )
        return value

    try:
        return json.loads(
            text,
            object_pairs_hook=pairs_hook,
            parse_constant=refuse_constant,
            parse_int=bounded_int,
        )
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno}); fix the syntax there",
            path=str(path),
        ) from exc
    except RecursionError as exc:
        raise ManifestError(f"{path}: invalid JSON: nested too deeply", path=str(path)) from exc
