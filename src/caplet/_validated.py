"""Settings objects that validate at construction: pydantic dataclasses with strict scalars.

caplet's rule per kind of input (docs/architecture.md, "Validation"):
manifests and policy are pydantic models; this module holds what the policy
objects share (:class:`~caplet._host._policy.Policy`,
:class:`~caplet._broker._policy.NetworkPolicy`, ``ContextLimits``,
``GuestLimits``, ``LogPolicy``):

* **Strict scalars.** ``True`` is not a number of processes and ``"512"``
  is not a number of MiB: :data:`Flag`, :data:`Count` ... refuse what
  pydantic's lax mode would coerce, with bounds that keep every value
  within what the kernel and SQLite take (a deadline of 10**30 ms would
  overflow ``poll``). A float field takes an int (60 means 60.0), never
  NaN or infinity. Enumerations take their value (``"best-effort"``),
  tuples a list, nested settings a table: what a TOML file holds.
* **One error.** :func:`validated` wraps the generated ``__init__`` so a
  bad value raises the caller's :class:`~caplet._errors.CapletError`
  subclass (``PolicyError``), whose message names each field by its
  dotted path, the value given, what was expected and the default, and
  whose ``problems`` keep them apart for a caller that adds where the
  value came from (a file, a flag).

pydantic is imported here, by host code only: a worker never loads this.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final, TypeVar

from pydantic import ConfigDict, Field, Strict, ValidationError

from caplet._suggest import did_you_mean

__all__ = [
    "MAX_BYTES",
    "MAX_COUNT",
    "MODEL_CONFIG",
    "Bytes",
    "Cores",
    "Count",
    "Duration",
    "Flag",
    "Kilobytes",
    "Megabytes",
    "Milliseconds",
    "Positive",
    "Problem",
    "Seconds",
    "Text",
    "validated",
]

#: The largest count, rate or number of milliseconds (a C int: poll(2), setrlimit(2)).
MAX_COUNT: Final = 2**31 - 1
#: The largest size in bytes (1 TiB: far above any sensible limit, within SQLite's INTEGER).
MAX_BYTES: Final = 2**40
#: The longest duration in seconds (about 24 days, like MAX_COUNT milliseconds).
_MAX_SECONDS: Final = MAX_COUNT / 1000

#: Unknown fields are errors (a typo must not silently keep a default), NaN is no number.
MODEL_CONFIG: Final = ConfigDict(extra="forbid", allow_inf_nan=False)

Flag = Annotated[bool, Strict()]
Text = Annotated[str, Strict()]
#: 0 or more (a pool that may be empty, a rate that may be zero).
Count = Annotated[int, Strict(), Field(ge=0, le=MAX_COUNT)]
#: 1 or more.
Positive = Annotated[int, Strict(), Field(ge=1, le=MAX_COUNT)]
Milliseconds = Annotated[int, Strict(), Field(ge=1, le=MAX_COUNT)]
Bytes = Annotated[int, Strict(), Field(ge=1, le=MAX_BYTES)]
Kilobytes = Annotated[int, Strict(), Field(ge=1, le=MAX_BYTES // 1024)]
Megabytes = Annotated[int, Strict(), Field(ge=1, le=MAX_BYTES // 2**20)]
Seconds = Annotated[float, Strict(), Field(gt=0, le=_MAX_SECONDS)]
#: Seconds that may be zero (a circuit breaker that half-opens at once).
Duration = Annotated[float, Strict(), Field(ge=0, le=_MAX_SECONDS)]
#: A CPU rate in cores (``cpu_cores``): a hundredth of a core (the kernel's
#: smallest quota of a 100 ms period is 1 ms) up to a machine's worth.
Cores = Annotated[float, Strict(), Field(ge=0.01, le=4096)]


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One invalid value: the dotted ``field``, what is wrong, and how to fix it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


_T = TypeVar("_T")


def validated(
    error: Callable[[str, tuple[Problem, ...]], Exception], what: str
) -> Callable[[type[_T]], type[_T]]:
    """Class decorator for a pydantic dataclass: bad values raise ``error(message, problems)``.

    ``what`` names the object in the message (``"policy"``). Apply it on
    top of ``@pydantic.dataclasses.dataclass``.
    """

    def decorate(cls: type[_T]) -> type[_T]:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
            try:
                init(self, *args, **kwargs)
            except ValidationError as exc:
                problems = problems_of(exc, cls)
                listed = "; ".join(str(p) for p in problems)
                raise error(f"invalid {what}: {listed}", problems) from None

        cls.__init__ = __init__  # type: ignore[method-assign]
        return cls

    return decorate


def problems_of(exc: ValidationError, root: type) -> tuple[Problem, ...]:
    """Each error of ``exc`` as a :class:`Problem`, worded for a person."""
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        location = tuple(error.get("loc", ()))
        path = _dotted(location)
        kind = error.get("type", "")
        if kind in ("unexpected_keyword_argument", "extra_forbidden"):
            parent = _field_owner(root, location[:-1])
            names = [f.name for f in dataclasses.fields(parent)] if parent is not None else []
            name = str(location[-1]) if location else ""
            hint = did_you_mean(name, names) or (f"; fields: {', '.join(names)}" if names else "")
            problems.append(Problem(path, f"unknown field{hint}"))
            continue
        message = _WORDS.get(kind) or str(error.get("msg", "invalid value"))
        message = message[:1].lower() + message[1:]
        message = message.removeprefix("value error, ")
        if not location:
            # A check across fields (a model validator): its message names them.
            problems.append(Problem("", message))
            continue
        # A field kept out of repr (a store address may carry a password) is not echoed.
        given = "the value" if _hidden(root, location) else _shown(error.get("input"))
        default = _default_at(root, location)
        fix = f" (the default is {default})" if default is not None else ""
        problems.append(Problem(path, f"{given} is not valid: {message}{fix}"))
    return tuple(problems)


#: pydantic's wording in the words of a settings file (TOML's arrays and tables).
_WORDS: Final = {
    "tuple_type": "expected a list",
    "list_type": "expected a list",
    "dict_type": "expected a table",
    "dataclass_type": "expected a table",
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "float_type": "expected a number",
    "string_type": "expected text",
}


def _dotted(location: Sequence[object]) -> str:
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _field_owner(root: type, location: Sequence[object]) -> type | None:
    """The dataclass that holds the field at ``location`` (the root for a top-level one)."""
    owner: type | None = root
    for part in location:
        if owner is None or not isinstance(part, str):
            return None
        field = {f.name: f for f in dataclasses.fields(owner)}.get(part)
        if field is None:
            return None
        default = _field_default(field)
        owner = type(default) if dataclasses.is_dataclass(default) else None
    return owner


def _hidden(root: type, location: Sequence[object]) -> bool:
    """True when the field at ``location`` is declared ``repr=False``."""
    owner = _field_owner(root, location[:-1]) if location else None
    if owner is None or not isinstance(location[-1], str):
        return False
    field = {f.name: f for f in dataclasses.fields(owner)}.get(location[-1])
    return field is not None and not field.repr


def _default_at(root: type, location: Sequence[object]) -> str | None:
    """The default of the scalar field at ``location``, as text (None when there is none)."""
    owner = _field_owner(root, location[:-1]) if location else None
    if owner is None or not location or not isinstance(location[-1], str):
        return None
    field = {f.name: f for f in dataclasses.fields(owner)}.get(location[-1])
    if field is None:
        return None
    default = _field_default(field)
    if dataclasses.is_dataclass(default) or default is dataclasses.MISSING:
        return None
    if isinstance(default, float) and math.isfinite(default):
        return f"{default:g}"
    value = getattr(default, "value", default)  # an enum: its value, as a file writes it
    if value is None:
        return "unset"
    return repr(value) if isinstance(value, str | tuple) else str(value)


def _field_default(field: dataclasses.Field[Any]) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING
