"""Command-line values turned into Python values without pydantic, where that is trivial.

typer 0.29 coerces every parameter that is not a bool flag through a
pydantic ``TypeAdapter`` built when the command line is parsed, defaults
and missing values included (``typer._coercion.build_runtime_param``). For
``caplet scan PATH`` that is importing pydantic and building a dozen
adapters: about a third of the 150 ms of CPU its start-up may take
(issue 16). The values caplet's commands take are plain (``str``,
``Path``, an ``Enum``, ``list[str]``, an ``int`` with bounds): those are
converted here with typer's own helpers (``coerce_cli_choice``,
``coerce_cli_path``), and everything else, every value this module is not
sure about and every error, goes to typer's own coercion. An error message
is therefore always typer's, word for word; tests/_cli/test_coercion.py
compares both on every parameter of every command.

typer's coercion layer is internal (``typer._coercion``, the parameter's
``_runtime_param``); it is touched in this one place, so a change of
typer's layout is a change here.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, get_args, get_origin

from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path
from typer.core import TyperArgument, TyperOption

__all__ = ["quick_coercion"]


class _Miss:
    """No quick answer: typer's own coercion decides (and words any error)."""


_MISS: Final = _Miss()


@dataclass(frozen=True)
class _QuickParam(RuntimeParam):
    """A parameter's coercion: the quick conversion, else typer's."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            quick = _convert(self.annotation, self.parameter_info, value, param, ctx)
        except Exception:  # typer raises it again, in its own words (a NUL in a path ...)
            quick = _MISS
        if not isinstance(quick, _Miss):
            return quick
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def quick_coercion(params: Iterable[object]) -> None:
    """Give each typer parameter that has no coercion yet the quick one."""
    for param in params:
        if isinstance(param, TyperArgument | TyperOption) and param._runtime_param is None:
            descriptor = param.type_descriptor
            if descriptor.file_annotation is None:
                param._runtime_param = _QuickParam(
                    parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
                )


def _convert(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """``value`` as ``annotation``, or :data:`_MISS` when typer should decide."""
    if info.parser is not None:
        return _MISS
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if not isinstance(value, list | tuple):
            return _MISS
        converted = [_convert(item, info, v, param, ctx) for v in value]
        return _MISS if any(isinstance(c, _Miss) for c in converted) else converted
    if annotation is str:
        return value if isinstance(value, str) else _MISS
    if annotation is Path and info.path_type in (None, Path):
        if isinstance(value, str):
            value = Path(value)
        if not isinstance(value, Path):
            return _MISS
        # typer's own path checks (exists, file_okay ...) and their messages.
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return coerce_cli_choice(
            value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
        )
    if annotation is int and not isinstance(value, bool):
        if isinstance(value, str) and _plain_integer(value):
            number = int(value)
        elif isinstance(value, int):
            number = value
        else:
            return _MISS
        low, high = info.min, info.max
        if info.clamp or (low is not None and number < low) or (high is not None and number > high):
            return _MISS
        return number
    return _MISS


def _plain_integer(text: str) -> bool:
    """ASCII digits with an optional minus: what every integer parser reads the same way."""
    digits = text[1:] if text.startswith("-") else text
    return digits.isascii() and digits.isdigit()
