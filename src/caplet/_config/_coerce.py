"""Inline ``key=value`` configuration: parsing, coercion, validation and redaction.

Values reach a plugin from three places: the manifest's defaults, inline
``key=value`` arguments (``caplet enable fs-read root=/srv/data``) and
interactive prompts. All of them pass through :func:`validate_value`, so a
plugin only ever sees values of the declared type and within the declared
bounds.

Unlike seed 000, where ``minimum``/``maximum``/``maxLength`` are advisory
hints left to the plugin, caplet *enforces* them: configuration scopes
capabilities (``fs.read:${config.root}``), so an out-of-range value is not a
plugin bug but a wider grant than the manifest promised.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from caplet._config._schema import ConfigField, ConfigType, ConfigValue, ScalarValue
from caplet._errors import ConfigError
from caplet._suggest import did_you_mean

__all__ = [
    "BOOLEAN_FALSE",
    "BOOLEAN_TRUE",
    "SECRET_MASK",
    "coerce_inline",
    "parse_inline",
    "redact",
    "type_name",
    "unknown_keys",
    "unknown_keys_message",
    "validate_default",
    "validate_value",
]

#: What a secret value is shown as, everywhere (design.md section 3).
SECRET_MASK = "******"  # noqa: S105 (a display mask, not a password)

#: Words accepted for ``true`` / ``false`` (trimmed, any case).
BOOLEAN_TRUE = ("true", "yes", "y", "1")
BOOLEAN_FALSE = ("false", "no", "n", "0")


@dataclass(frozen=True, slots=True)
class _Problem:
    """Why a value is invalid, in three parts so each caller can word the fix.

    ``expected`` reads after the field ("must be <= 10240"), ``got`` is the
    offending value as shown to the user (masked for secrets) and ``fix`` is
    the hint for an inline/Python value; :func:`validate_default` words its
    own fix because the default lives in the manifest.
    """

    expected: str
    got: str
    fix: str


# -- inline parsing -------------------------------------------------------------


def parse_inline(entries: Iterable[str]) -> list[tuple[str, str]]:
    """Split ``key=value`` entries at the first ``=``; trim both sides.

    Entries with no ``=`` at all, or with an empty key, are ignored: the CLI
    passes plugin arguments positionally, and a bare word there is not a
    configuration value (silently treating it as ``word=""`` would turn a typo
    into an empty setting). A repeated key keeps the position of its first
    occurrence and the value of its last, as a command line is read left to
    right (``a=1 a=2`` means ``a=2``).
    """
    values: dict[str, str] = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        key = key.strip()
        if not sep or not key:
            continue
        values[key] = value.strip()
    return list(values.items())


def unknown_keys_message(plugin: str, fields: Sequence[ConfigField], unknown: Sequence[str]) -> str:
    """Why unknown keys are refused, with a suggestion for each and the declared names."""
    known = [f.name for f in fields]
    hints = "; ".join(f"{key!r}{did_you_mean(key, known)}" for key in unknown)
    return (
        f"plugin {plugin!r}: unknown config key(s) {hints}; "
        f"declared fields: {', '.join(known) or '(none)'}; nothing was applied"
    )


def unknown_keys(fields: Sequence[ConfigField], keys: Iterable[str]) -> list[str]:
    """The keys that name no field of the schema, in order, without repeats."""
    known = {f.name for f in fields}
    unknown: dict[str, None] = {}
    for key in keys:
        if key not in known:
            unknown[key] = None
    return list(unknown)


# -- coercion -------------------------------------------------------------------


def coerce_inline(plugin: str, field: ConfigField, raw: str) -> ConfigValue:
    """Coerce the raw string of an inline value or a prompt answer by ``field.type``.

    The result is also validated (:func:`validate_value`), so what this
    returns is ready to hand to the plugin. Raises :class:`ConfigError`
    naming the plugin, the field, what was expected and how to fix it.
    """
    if field.type is ConfigType.NUMBER:
        # Seed 000 parses numbers with parseFloat, which lets NaN/Infinity
        # through; a non-finite setting is never meaningful (every bound
        # check is false for NaN), so fall back to the default, and refuse
        # when there is none.
        number = _coerce_scalar(field, ConfigType.NUMBER, raw)
        if isinstance(number, _Problem):
            raise _value_error(plugin, field, number)
        if isinstance(number, float) and not math.isfinite(number):
            if field.default is None:
                raise ConfigError(
                    f"plugin {plugin!r}: config field {field.name!r} must be a finite number, "
                    f"got {_show(field, raw.strip())}; pass a number such as {field.name}=1.5"
                )
            return validate_value(plugin, field, field.default)
        return validate_value(plugin, field, number)
    if field.type is ConfigType.ARRAY:
        items = _coerce_array(field, raw)
        if isinstance(items, _Problem):
            raise _value_error(plugin, field, items)
        return validate_value(plugin, field, items)
    if (
        field.type is ConfigType.STRING
        or field.type is ConfigType.INTEGER
        or field.type is ConfigType.BOOLEAN
    ):
        value = _coerce_scalar(field, field.type, raw)
        if isinstance(value, _Problem):
            raise _value_error(plugin, field, value)
        return validate_value(plugin, field, value)
    assert_never(field.type)


def _coerce_scalar(field: ConfigField, kind: ConfigType, raw: str) -> ScalarValue | _Problem:
    """One scalar from text; non-finite numbers are returned for the caller to judge."""
    if kind is ConfigType.STRING:
        return raw
    if kind is ConfigType.BOOLEAN:
        # Seed 000 maps every answer that is not y/yes/true to false. A typo
        # ("ture") would then silently disable something, so caplet accepts
        # only the listed words and refuses anything else.
        word = raw.strip().lower()
        if word in BOOLEAN_TRUE:
            return True
        if word in BOOLEAN_FALSE:
            return False
        return _Problem(
            "must be a boolean",
            _show(field, raw.strip()),
            f"use one of {'/'.join(BOOLEAN_TRUE)} or {'/'.join(BOOLEAN_FALSE)}",
        )
    if kind is ConfigType.INTEGER:
        try:
            return int(raw.strip())
        except ValueError:
            return _Problem(
                "must be an integer",
                _show(field, raw.strip()),
                f"pass a whole number, e.g. {field.name}=10",
            )
    if kind is ConfigType.NUMBER:
        try:
            return float(raw.strip())
        except ValueError:
            return _Problem(
                "must be a number",
                _show(field, raw.strip()),
                f"pass a number, e.g. {field.name}=1.5",
            )
    if kind is ConfigType.ARRAY:
        return _Problem(
            "must not nest arrays",
            "an array of arrays",
            "declare a scalar 'items' type (string, number, integer or boolean)",
        )
    assert_never(kind)


def _coerce_array(field: ConfigField, raw: str) -> tuple[ScalarValue, ...] | _Problem:
    """Comma-separated items, optionally wrapped in ``[`` ``]`` (seed 000's format)."""
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    items: list[ScalarValue] = []
    for raw_item in text.split(","):
        part = raw_item.strip()
        if not part:
            continue
        item = _coerce_scalar(field, field.items, part)
        if isinstance(item, _Problem):
            return _item_problem(field, len(items) + 1, item)
        # Per-item non-finite numbers have no per-item default to fall back
        # to, so they are refused rather than replaced.
        if isinstance(item, float) and not math.isfinite(item):
            return _item_problem(
                field,
                len(items) + 1,
                _Problem("", _show(field, part), "remove or fix that item"),
            )
        items.append(item)
    return tuple(items)


# -- validation -----------------------------------------------------------------


def validate_value(plugin: str, field: ConfigField, value: object) -> ConfigValue:
    """Check a value given from Python (or produced by coercion) and normalise it.

    Types are strict: ``bool`` is not accepted as an integer or number, and a
    string is never parsed here (that is :func:`coerce_inline`'s job). An
    ``int`` given for a ``number`` field is returned as ``float`` so a plugin
    always receives one type for a field (``1`` and ``1.0`` compare equal, so
    nothing else changes). Lists and tuples for arrays become tuples.
    ``minimum``/``maximum`` apply to numbers and integers, ``max_length`` to
    string length and to the number of items of an array.

    Example error: ``plugin 'fs-read': config field 'max_kb' must be <= 10240,
    got 20000; pass a smaller value (max_kb=10240)``.
    """
    result = _check(field, value)
    if isinstance(result, _Problem):
        raise _value_error(plugin, field, result)
    return result


def validate_default(field: ConfigField) -> None:
    """Check that the schema's own default is a valid value (no-op without one)."""
    if field.default is None:
        return
    result = _check(field, field.default)
    if isinstance(result, _Problem):
        raise ConfigError(
            f"config field {field.name!r}: default {result.expected}, got {result.got}; "
            f"change the default in [config.{field.name}] (or its bounds)"
        )


#: Plural names of item types, for "must hold only integers".
_PLURAL = {
    ConfigType.STRING: "strings",
    ConfigType.NUMBER: "finite numbers",
    ConfigType.INTEGER: "integers",
    ConfigType.BOOLEAN: "booleans",
    ConfigType.ARRAY: "scalars (no nested arrays)",
}


def _item_problem(field: ConfigField, index: int, problem: _Problem) -> _Problem:
    """Reword an item's problem for the array that holds it (1-based ``index``)."""
    return _Problem(
        f"must hold only {_PLURAL[field.items]}", f"{problem.got} at item {index}", problem.fix
    )


def _value_error(plugin: str, field: ConfigField, problem: _Problem) -> ConfigError:
    return ConfigError(
        f"plugin {plugin!r}: config field {field.name!r} {problem.expected}, "
        f"got {problem.got}; {problem.fix}"
    )


def _check(field: ConfigField, value: object) -> ConfigValue | _Problem:
    if field.type is ConfigType.ARRAY:
        if not isinstance(value, list | tuple):
            return _Problem(
                "must be an array",
                _describe(field, value),
                f"pass a list, or inline: {field.name}=a,b,c",
            )
        items: list[ScalarValue] = []
        for index, item in enumerate(value, start=1):
            checked = _check_scalar(field, field.items, item)
            if isinstance(checked, _Problem):
                return _item_problem(field, index, checked)
            items.append(checked)
        if field.max_length is not None and len(items) > field.max_length:
            return _Problem(
                f"must have at most {field.max_length} items",
                str(len(items)),
                "pass fewer items",
            )
        return tuple(items)
    if (
        field.type is ConfigType.STRING
        or field.type is ConfigType.NUMBER
        or field.type is ConfigType.INTEGER
        or field.type is ConfigType.BOOLEAN
    ):
        scalar = _check_scalar(field, field.type, value)
        if isinstance(scalar, _Problem):
            return scalar
        return _check_bounds(field, scalar)
    assert_never(field.type)


def _check_scalar(field: ConfigField, kind: ConfigType, value: object) -> ScalarValue | _Problem:
    """The type check of one scalar (``kind`` is the field's type or its item type)."""
    if kind is ConfigType.STRING:
        if isinstance(value, str):
            return value
        return _Problem("must be a string", _describe(field, value), "pass text")
    if kind is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        return _Problem("must be a boolean", _describe(field, value), "pass True or False")
    if kind is ConfigType.INTEGER:
        # bool is a subclass of int; True is not a count.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return _Problem(
            "must be an integer",
            _describe(field, value),
            f"pass a whole number, e.g. {field.name}=10",
        )
    if kind is ConfigType.NUMBER:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if math.isfinite(number):
                return number
            return _Problem(
                "must be a finite number",
                _describe(field, value),
                f"pass a number, e.g. {field.name}=1.5",
            )
        return _Problem(
            "must be a number", _describe(field, value), f"pass a number, e.g. {field.name}=1.5"
        )
    if kind is ConfigType.ARRAY:
        return _Problem(
            "must not nest arrays",
            "an array of arrays",
            "declare a scalar 'items' type (string, number, integer or boolean)",
        )
    assert_never(kind)


def _check_bounds(field: ConfigField, value: ScalarValue) -> ScalarValue | _Problem:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if field.max_length is not None and len(value) > field.max_length:
            return _Problem(
                f"must be at most {field.max_length} characters long",
                f"{len(value)} characters",
                "pass a shorter value",
            )
        return value
    if field.minimum is not None and value < field.minimum:
        bound = _number(field.minimum)
        return _Problem(
            f"must be >= {bound}",
            _show(field, _number(value), quote=False),
            f"pass a larger value ({field.name}={bound})",
        )
    if field.maximum is not None and value > field.maximum:
        bound = _number(field.maximum)
        return _Problem(
            f"must be <= {bound}",
            _show(field, _number(value), quote=False),
            f"pass a smaller value ({field.name}={bound})",
        )
    return value


# -- display --------------------------------------------------------------------


def redact(
    fields: Sequence[ConfigField], values: Mapping[str, ConfigValue]
) -> dict[str, ConfigValue]:
    """A display copy of ``values`` with every secret field shown as :data:`SECRET_MASK`.

    Keys the schema does not know are kept as they are: they cannot be known
    to be secret, and the caller reports them as unknown anyway.
    """
    secret = {f.name for f in fields if f.secret}
    return {key: SECRET_MASK if key in secret else value for key, value in values.items()}


def _number(value: float) -> str:
    """``10240.0`` -> ``10240``: bounds are stored as floats but usually written as integers."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _show(field: ConfigField, text: str, *, quote: bool = True) -> str:
    """A value as shown in a message; a secret's value is never echoed."""
    if field.secret:
        return SECRET_MASK
    return repr(text) if quote else text


def _describe(field: ConfigField, value: object) -> str:
    """A wrongly typed value as ``'abc' (string)``; secrets show only their type."""
    kind = type_name(value)
    if field.secret:
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown} ({kind})"


def type_name(value: object) -> str:
    """The manifest-language name of a value's type (also used by the manifest loader)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object/table"
    if isinstance(value, datetime.date | datetime.time):
        return "date/time"
    if value is None:
        return "null"
    return type(value).__name__
