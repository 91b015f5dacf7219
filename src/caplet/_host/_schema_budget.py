"""The work budget of one JSON Schema validation (red team round 5, docs/security.md).

A schema that multiplies (``anyOf`` tried on every item, ``$ref`` recursion,
``uniqueItems`` under every branch) could hold the host's calling thread for
days on a 1 MiB value. Each validation run by :func:`caplet._host._validate.first_error`
gets ``WORK_BASE`` + ``WORK_PER_UNIT`` units per unit of the value's size
(:func:`value_size`); every keyword evaluated and every subschema entered is
charged (:func:`metered`, :func:`metered_descend`), and a validation past its
budget raises :class:`OutOfWorkError`, which the caller turns into a refusal.
Split out of ``_validate`` by concern: the budget is metering, not schemas.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "CHARS_PER_UNIT",
    "WORK_BASE",
    "WORK_PER_UNIT",
    "OutOfWorkError",
    "metered",
    "metered_descend",
    "value_size",
    "within",
]

#: One validation's work budget (red team round 5): ``WORK_BASE`` plus
#: ``WORK_PER_UNIT`` per unit of the value's size (:func:`value_size`). The
#: schemas of tests/_host and tests/plugins spend at most 16 per unit; a schema
#: that multiplies (``anyOf`` tried on every item, ``$ref`` recursion) is
#: refused after about a microsecond per unit of budget (docs/security.md).
WORK_BASE = 100_000
WORK_PER_UNIT = 100
CHARS_PER_UNIT = 64
_ERROR_UNITS = 4
#: Keywords whose cost is the whole value under them, not its top level.
_DEEP_KEYWORDS = frozenset({"enum", "const", "uniqueItems"})
#: Keywords whose value is data looked up (a set, one comparison), not looped over.
_DATA_VALUED = frozenset({"enum", "const"})
_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "caplet_schema_budget", default=None
)


class OutOfWorkError(Exception):
    """The validation spent its budget (caught by :func:`first_error`, never seen)."""


def _spend(units: int) -> None:
    left = _BUDGET.get()
    if left is None:  # not within first_error (compiling, a test's own is_valid)
        return
    left[0] -= units
    if left[0] < 0:
        raise OutOfWorkError


def _units(value: object) -> int:
    """The top-level size of ``value``: what a keyword's own loop over it costs."""
    kind = type(value)
    if kind is dict or kind is list:  # the common case first: it runs for every keyword
        return 1 + len(value)  # type: ignore[arg-type]
    if isinstance(value, str | bytes):
        return 1 + len(value) // CHARS_PER_UNIT
    if isinstance(value, Mapping | list | tuple):
        return 1 + len(value)
    return 1


def value_size(value: object) -> int:
    """The whole size of ``value`` in work units (iterative: any depth)."""
    size = 0
    stack = [value]
    while stack:
        node = stack.pop()
        size += 1 if isinstance(node, Mapping | list | tuple) else _units(node)
        if isinstance(node, Mapping):
            size += sum(_units(key) for key in node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return size


def metered(name: str, check: Any) -> Any:
    """``check`` (a keyword's function) charged to the budget each time it is evaluated.

    A keyword costs one unit, plus the top level of the value it checks (its
    own loop over an object's keys or a string's characters; what it descends
    into is charged there), plus the top level of its own value (``required``,
    ``properties``, ``anyOf`` loop over it); ``enum``, ``const`` and
    ``uniqueItems`` compare the whole value. Charged when jsonschema calls the
    keyword, before its work runs (most are generators).
    """
    deep = name in _DEEP_KEYWORDS
    data = name in _DATA_VALUED

    @functools.wraps(check)
    def charged(validator: Any, value: object, instance: object, schema: object) -> Any:
        cost = value_size(instance) if deep else _units(instance)
        _spend(1 + cost + (0 if data else _units(value)))
        return check(validator, value, instance, schema)

    return charged


def _charged(errors: Iterable[Any]) -> Iterator[Any]:
    """Each error costs ``_ERROR_UNITS`` at each subschema it leaves: the dearest step
    (``required`` of 1,000 names on 1,000 ``{}`` makes a million, all collected).
    Charged per subschema, not per keyword: a generator per keyword evaluation
    made honest validations half again slower."""
    for error in errors:
        _spend(_ERROR_UNITS)
        yield error


def metered_descend(descend: Any) -> Any:
    """``descend`` charged one unit per key of the subschema: entering one builds a
    validator for it and walks its keys, even when none of them is a keyword
    (``allOf`` of thousands of ``{}`` would otherwise be free)."""

    def charged(self: Any, instance: object, schema: object, *args: Any, **kwargs: Any) -> Any:
        _spend(1 + _units(schema))
        return _charged(descend(self, instance, schema, *args, **kwargs))

    return charged


def within(budget: int, run: Callable[[object], Any], value: object) -> Any:
    """``run(value)`` with ``budget`` units to spend; past it, :class:`OutOfWorkError`."""
    token = _BUDGET.set([budget])
    try:
        return run(value)
    finally:
        _BUDGET.reset(token)
