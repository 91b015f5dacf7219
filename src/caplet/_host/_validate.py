"""Checking calls against the JSON Schemas a manifest declares for its functions.

The channel already guarantees that a result is JSON-like (plus bytes),
nested at most ``MAX_DEPTH`` (64) containers deep and no larger than the
worker's frame limit (:meth:`Policy.max_output_bytes`); this module adds
the plugin's own contract. A function may declare ``args`` (a schema for
its positional arguments as one JSON array) and ``returns`` (a schema for
its result) in the manifest; the host validates both with the
``jsonschema`` library's Draft 2020-12 validator.

* Schemas are checked once, when the plugin is enabled
  (:func:`compile_validators`): an invalid schema refuses the enable with a
  :class:`ManifestError` naming the manifest file and the field. Each
  schema is compiled into a validator then, never per call.
* A result its schema refuses raises :class:`InvalidOutputError` (a plugin
  failure: it counts for the circuit breaker); arguments their schema
  refuses raise :class:`LifecycleError` (the caller's mistake: it does not).
* Only local references (``#...``) are allowed and every one must resolve
  when the plugin is enabled: a schema is validated with an empty
  ``referencing`` registry, so the host never fetches anything (by default
  jsonschema would download a remote ``$ref``).

* Each validation has a work budget (``WORK_BASE`` + ``WORK_PER_UNIT`` per
  unit of the value's size): every keyword and every subschema entered is
  charged, and a value whose check runs past it is refused unchecked, with a
  message saying to simplify the schema (red team round 5).

``jsonschema`` takes ~150 ms to import, so it is imported only when a
plugin actually declares a schema.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caplet._errors import InvalidOutputError, LifecycleError, ManifestError
from caplet._host._schema_budget import (
    CHARS_PER_UNIT,
    WORK_BASE,
    WORK_PER_UNIT,
    OutOfWorkError,
    metered,
    metered_descend,
    value_size,
    within,
)
from caplet._manifest._model import Manifest

__all__ = ["FunctionValidator", "compile_schema", "compile_validators", "first_error"]

#: The dialect caplet validates with; a schema may name it in ``$schema``.
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Keywords whose values are data, not subschemas (refs inside them are not refs).
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
_REF_KEYWORDS = ("$ref", "$dynamicRef")
#: How much of a validation message is quoted (it may repeat a large value).
_MESSAGE_CHARS = 300


@dataclass(frozen=True, slots=True)
class FunctionValidator:
    """The compiled schemas of one function (``None`` where none is declared).

    ``field`` is the function's dotted manifest field
    (``modules.main.functions.run``) and ``manifest_path`` the manifest file,
    so every message says where the contract was written.
    """

    plugin: str
    target: str
    field: str
    manifest_path: Path
    args: Any = None
    returns: Any = None

    def check_args(self, args: Sequence[object], kwargs: Mapping[str, object]) -> None:
        """Refuse (LifecycleError) arguments the declared ``args`` schema does not accept."""
        if self.args is None:
            return
        if kwargs:
            raise LifecycleError(
                f"plugin {self.plugin!r}: {self.target} declares a schema for its positional "
                f"arguments ({self.manifest_path} field {self.field}.args), so keyword "
                f"arguments ({', '.join(sorted(kwargs))}) cannot be checked; pass them "
                "positionally"
            )
        problem = first_error(self.args, list(args))
        if problem is not None:
            where, message, schema_path = problem
            raise LifecycleError(
                f"plugin {self.plugin!r}: the arguments of {self.target} do not match its "
                f"declared args schema: at {where}: {message} (schema path {schema_path}, "
                f"{self.manifest_path} field {self.field}.args); pass arguments that match it"
            )

    def check_result(self, value: object) -> None:
        """Raise InvalidOutputError when the declared ``returns`` schema refuses ``value``."""
        if self.returns is None:
            return
        problem = first_error(self.returns, value)
        if problem is not None:
            where, message, schema_path = problem
            raise InvalidOutputError(
                f"plugin {self.plugin!r}: {self.target} returned a value that does not match "
                f"its declared returns schema: at {where}: {message} (schema path "
                f"{schema_path}, {self.manifest_path} field {self.field}.returns); fix the "
                "plugin or its schema",
                plugin=self.plugin,
                target=self.target,
                schema_path=schema_path,
            )


def compile_validators(manifest: Manifest) -> Mapping[str, FunctionValidator]:
    """Check and compile every declared schema of ``manifest``.

    Returns ``{"module.function": FunctionValidator}`` for the functions
    that declare at least one schema (the others need no check). Raises
    :class:`ManifestError` (with ``path`` and ``field``) for the first
    schema that is not a valid Draft 2020-12 schema or has a reference that
    does not resolve locally.
    """
    compiled: dict[str, FunctionValidator] = {}
    for module in manifest.modules:
        for function in module.functions:
            if function.args_schema is None and function.returns_schema is None:
                continue
            field = f"modules.{module.name}.functions.{function.name}"
            compiled[f"{module.name}.{function.name}"] = FunctionValidator(
                plugin=manifest.name,
                target=f"{module.name}.{function.name}",
                field=field,
                manifest_path=manifest.path,
                args=_compile(function.args_schema, manifest.path, f"{field}.args"),
                returns=_compile(function.returns_schema, manifest.path, f"{field}.returns"),
            )
    return types.MappingProxyType(compiled)


# -- compiling -------------------------------------------------------------------------


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12, with tuples counted as arrays, every keyword and descent metered.

    Positional arguments arrive as a tuple and a caller may nest tuples;
    both cross the channel as arrays, so they are arrays to the schema too.
    """
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "array", lambda _checker, instance: isinstance(instance, list | tuple)
    )
    keywords = dict(Draft202012Validator.VALIDATORS)
    keywords.update({"pattern": _re2_pattern, "uniqueItems": _unique_items, "enum": _enum})
    cls = validators.extend(
        Draft202012Validator,
        validators={name: metered(name, check) for name, check in keywords.items()},
        type_checker=checker,
    )
    cls.descend = metered_descend(cls.descend)
    return cls


@functools.lru_cache(maxsize=256)
def _re2(pattern: str) -> Any:
    import re2

    return re2.compile(pattern)


def _re2_pattern(validator: Any, pattern: str, instance: object, schema: object) -> Any:
    """``pattern`` on RE2, a linear-time engine: a plugin declares the pattern and
    the host runs it on what the plugin returns, so a backtracking engine (the
    stdlib ``re`` jsonschema uses) would let a hostile manifest stall the host
    (catastrophic backtracking, e.g. ``(a+)+$``)."""
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _re2(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _unique_items(validator: Any, unique: object, instance: object, schema: object) -> Any:
    """``uniqueItems`` in linear time (red-team round 5).

    jsonschema compares every pair of items that cannot be sorted (objects,
    arrays, mixed types): a plugin that declared ``returns = { uniqueItems =
    true }`` and returned 8,000 small objects (56 KB) held the calling thread
    of the host for two minutes, a 1 MiB result for hours; untrusted guest
    code did the same through an honest plugin's ``args`` schema, and a
    plugin through an application's schema for ``ctx.app``. Each item is
    reduced to a hashable key with JSON Schema's equality instead
    (:func:`_json_key`), and a set finds a repeat.
    """
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        repeat = _repeat(instance)
        if repeat is not None:
            # Not jsonschema's repr of the whole array (up to the frame limit).
            yield ValidationError(f"the array has non-unique elements: {repeat}")


#: The keys of the ``enum`` lists being validated with, by the list's id (the
#: list itself is kept, so the id is not reused while it is cached).
_ENUM_KEYS: dict[int, tuple[object, frozenset[object] | None]] = {}
_ENUM_CACHE_SIZE = 256


def _enum(validator: Any, enums: Any, instance: object, schema: object) -> Any:
    """``enum`` by a set lookup (red-team round 5).

    jsonschema compares the value with every entry: a plugin's own 1 MiB
    manifest holds an ``enum`` of 100,000 strings, its 1 MiB result as many
    items, and each item was compared with each entry in the host, after
    the call's deadline (4,000 by 4,000 took 3.3 s, so that half an hour).
    The entries' keys (:func:`_json_key`) are computed once per schema.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

    cached = _ENUM_KEYS.get(id(enums))
    if cached is None or cached[0] is not enums:
        try:
            keys: frozenset[object] | None = frozenset(_json_key(entry) for entry in enums)
        except (TypeError, RecursionError):
            keys = None
        if len(_ENUM_KEYS) >= _ENUM_CACHE_SIZE:
            _ENUM_KEYS.clear()
        cached = _ENUM_KEYS[id(enums)] = (enums, keys)
    keys = cached[1]
    if keys is not None:
        try:
            found = _json_key(instance) in keys
        except (TypeError, RecursionError):
            pass  # not JSON: jsonschema's own check below
        else:
            if not found:
                yield ValidationError(
                    f"{instance!r} is not one of the {len(enums)} values of its enum"
                )
            return
    yield from Draft202012Validator.VALIDATORS["enum"](validator, enums, instance, schema)


def _repeat(items: Any) -> str | None:
    """Which item repeats an earlier one, or None when all differ."""
    try:
        seen: dict[object, int] = {}
        for index, item in enumerate(items):
            first = seen.setdefault(_json_key(item), index)
            if first != index:
                return f"item {index} equals item {first}"
    except (TypeError, RecursionError):
        # Not the data a channel carries (an application's own objects, before
        # they cross it): jsonschema's own check, with its own semantics.
        from jsonschema._utils import uniq

        return None if uniq(items) else "two items are equal"
    return None


def _all_unique(items: Any) -> bool:
    return _repeat(items) is None


def _json_key(value: object) -> object:
    """A hashable key equal for exactly the values jsonschema's ``equal`` calls equal.

    ``True`` is not ``1`` (``unbool``), ``1`` is ``1.0``, objects compare by
    their keys and values in any order, arrays (lists, tuples, and bytes,
    which jsonschema treats as a sequence of integers) item by item. NaN keeps
    its identity, as in ``equal``. Raises TypeError for anything else.
    """
    if value is True or value is False:
        return ("bool", value)
    if value is None:
        return ("null",)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, Mapping):
        return ("obj", frozenset((name, _json_key(item)) for name, item in value.items()))
    if isinstance(value, list | tuple | bytes):
        return ("arr", tuple(_json_key(item) for item in value))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _check_patterns(schema: object, refuse: Any) -> None:
    """Every ``pattern`` must compile under RE2; ``patternProperties`` is refused.

    jsonschema evaluates ``patternProperties`` (and, through it,
    ``additionalProperties`` and ``unevaluatedProperties``) with the stdlib
    ``re`` in several places; refusing the keyword keeps every plugin-declared
    regular expression on RE2. ``propertyNames`` with ``pattern`` expresses
    the same constraint on keys.
    """
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "patternProperties" in node:
                raise refuse(
                    "patternProperties is not supported (its patterns would run on a "
                    "backtracking engine in the host); use propertyNames with a pattern"
                )
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                try:
                    _re2(pattern)
                except Exception as exc:  # re2.error, and ValueError on bad UTF-8
                    raise refuse(
                        f"pattern {pattern!r} is not supported by RE2 ({exc}); caplet runs "
                        "patterns on RE2 (no backreferences or lookaround)"
                    ) from None
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _compile(schema: Mapping[str, object] | None, path: Path, field: str) -> Any:
    if schema is None:
        return None

    def refuse(problem: str) -> ManifestError:
        return ManifestError(
            f"{path}: {field} is not a usable JSON Schema: {problem}; fix that field "
            f"(caplet validates with Draft 2020-12, {DIALECT})",
            path=str(path),
            field=field,
        )

    return compile_schema(schema, refuse)


def compile_schema(schema: Mapping[str, object], refuse: Callable[[str], Exception]) -> Any:
    """Check ``schema`` and compile it into a validator (Draft 2020-12, RE2 patterns).

    ``refuse(problem)`` builds the exception raised for a schema that is not
    usable (invalid, a non-local or unresolvable reference, a pattern RE2
    cannot run, ``patternProperties``). Also used for the schemas an
    application declares for its capabilities (:mod:`caplet._host._apps`).
    """
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    _check_shape(schema, refuse)
    plain = _thaw(schema)
    if not isinstance(plain, dict):
        raise refuse(f"a schema must be a JSON object, got {type(schema).__name__}")

    dialect = plain.get("$schema", DIALECT)
    if dialect not in (DIALECT, DIALECT + "#"):
        raise refuse(f"$schema is {dialect!r}; remove it or set it to {DIALECT!r}")
    # The dialect is checked: jsonschema would switch to its own validator class
    # (unmetered, stdlib re) wherever a schema it enters names one, and a
    # "$ref": "#" enters the root.
    plain.pop("$schema", None)
    cls = _validator_class()
    try:
        cls.check_schema(plain)
    except SchemaError as exc:
        raise refuse(f"at {exc.json_path}: {_short(exc.message)}") from None
    except RecursionError:  # only from a deep stack of the caller's own: the depth is bounded
        raise refuse(
            "it is nested too deeply to be checked; flatten it (move parts to $defs)"
        ) from None
    _check_references(plain, refuse)
    _check_patterns(plain, refuse)
    # An empty registry: nothing beyond this schema (and the dialect's own
    # meta-schemas) can be referenced, so validation never touches the network.
    validator = cls(plain, registry=Registry())
    try:
        validator.is_valid(None)
    except RecursionError:
        raise refuse(
            "its references loop without descending into the value (e.g. a $ref to itself)"
        ) from None
    return validator


#: How deeply a schema may nest (objects and arrays): checking one 128 deep
#: against the meta-schema exhausted the interpreter's stack (RecursionError, a
#: traceback at enable). 64, as deep as a value may be, leaves room for the
#: caller's frames; ``$defs`` and ``$ref`` express anything deeper.
MAX_SCHEMA_DEPTH = 64


def _check_shape(schema: object, refuse: Callable[[str], Exception]) -> None:
    """Refuse a schema nested deeper than ``MAX_SCHEMA_DEPTH`` or naming a dialect inside.

    jsonschema validates a subschema naming ``$schema`` with that dialect's own
    class, out of reach of the budget, RE2 and the linear ``uniqueItems``; the
    top one is checked and removed by :func:`compile_schema`. A ``"$schema"``
    string is refused anywhere inside, data included (a property may be named
    ``const``). Iterative: it runs before anything recursive sees the schema.
    """
    stack: list[tuple[object, int, bool]] = [(schema, 1, True)]
    while stack:
        node, depth, top = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise refuse(
                f"it is nested more than {MAX_SCHEMA_DEPTH} levels deep; flatten it (move "
                "repeated parts to $defs)"
            )
        if isinstance(node, Mapping):
            if not top and isinstance(node.get("$schema"), str):
                raise refuse(
                    "$schema is allowed only at the top of the schema (caplet validates "
                    "every part with Draft 2020-12); remove the inner one"
                )
            stack.extend((item, depth + 1, False) for item in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((item, depth + 1, False) for item in node)


def _thaw(value: object) -> object:
    """Plain dicts and lists: jsonschema's "object" is ``dict`` and the manifest froze it."""
    if isinstance(value, Mapping):
        return {str(key): _thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(item) for item in value]
    return value


def _check_references(schema: dict[str, object], refuse: Callable[[str], Exception]) -> None:
    """Every ``$ref``/``$dynamicRef`` must be local (``#...``) and resolve."""
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(schema)
    base = resource.id() or "urn:caplet:schema"
    resolver = Registry().with_resource(base, resource).crawl().resolver(base_uri=base)
    for keyword, ref in _references(schema):
        if not ref.startswith("#"):
            raise refuse(
                f"{keyword} {ref!r} points outside this schema; caplet never fetches schemas, "
                "so use local references (#/$defs/...) only"
            )
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise refuse(f"{keyword} {ref!r} does not resolve within this schema") from None


def _references(value: object) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _REF_KEYWORDS and isinstance(item, str):
                yield key, item
            elif key not in _DATA_KEYWORDS:
                yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


# -- validating -------------------------------------------------------------------------


def first_error(validator: Any, value: object) -> tuple[str, str, str] | None:
    """``(instance path, message, schema path)`` of the most relevant error, or None."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    odd = _non_finite(value)
    if odd is not None:
        # Every comparison with NaN is false, so minimum and maximum (instance > maximum)
        # let it through: a bound the schema promises did not hold (attack18).
        where, number = odd
        return where, f"{number!r} is not a JSON number (NaN and infinity are not JSON)", "/"
    size = value_size(value)
    budget = WORK_BASE + WORK_PER_UNIT * size
    try:
        # Each pass has the budget: is_valid stops at the first error, best_match
        # collects them all (only for a value already known to be invalid).
        if within(budget, validator.is_valid, value):
            return None
        error = within(budget, lambda v: best_match(validator.iter_errors(v)), value)
    except OutOfWorkError:
        return (
            "$",
            f"checking the value against the schema took more than its work budget "
            f"({budget:,} units for a value of size {size:,}: {WORK_BASE:,} + "
            f"{WORK_PER_UNIT} per value, object key or {CHARS_PER_UNIT} characters); the "
            "value is refused unchecked: simplify the schema (fewer anyOf/oneOf branches "
            "tried on every item, less nesting and $ref recursion)",
            "/",
        )
    except (Unresolvable, RecursionError) as exc:
        # compile_validators rules both out; should a schema still get here,
        # the call fails with a message rather than a foreign exception.
        return "$", f"the schema cannot be evaluated ({type(exc).__name__})", "/"
    except (OverflowError, ValueError) as exc:
        # Values JSON does not have, which still cross the channel (msgpack
        # floats, an application's str): jsonschema's multipleOf raises
        # OverflowError for infinity and ValueError for NaN, RE2 a
        # UnicodeEncodeError for a lone surrogate (issue 13). Refused.
        return (
            "$",
            f"the value cannot be checked against the schema ({type(exc).__name__}): NaN, "
            "infinity and unpaired surrogates are not JSON",
            "/",
        )
    if error is None:  # pragma: no cover - is_valid said there was one
        return None
    schema_path = "/".join(str(part) for part in error.absolute_schema_path) or "/"
    return error.json_path, _short(error.message), schema_path


def _non_finite(value: object) -> tuple[str, float] | None:
    """The JSON path and value of the first NaN or infinity in ``value``, or None.

    Iterative, like :func:`value_size`; paths are only spelled out for a value
    that holds one (a second walk, on the refusal).
    """
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                break
        elif isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    else:
        return None
    paths: list[tuple[object, str]] = [(value, "$")]
    while paths:
        node, path = paths.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path, node
        if isinstance(node, Mapping):
            paths.extend(
                (item, f"{path}.{key}" if str(key).isidentifier() else f"{path}[{key!r}]")
                for key, item in reversed(list(node.items()))
            )
        elif isinstance(node, list | tuple):
            paths.extend((item, f"{path}[{n}]") for n, item in reversed(list(enumerate(node))))
    return None  # pragma: no cover - the first walk found one


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."
