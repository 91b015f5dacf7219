"""The quick coercion gives what typer's own gives, value for value and error for error.

caplet._cli._coercion converts the plain parameter types without building
typer's pydantic adapters (issue 16's start-up budget). Every parameter of
every command is fed the same values through both, and the results (or
the errors' words) must be the same.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import typer.main
from typer._click import Context
from typer._coercion import build_runtime_param
from typer.core import TyperArgument, TyperOption

from caplet._cli._app import app
from caplet._cli._coercion import _QuickParam, quick_coercion
from caplet._cli._command import load_commands

_TEXTS = ("x", "", "a\0b", "\udcff", "--", "1", "~/x", "/tmp", " spaced ", "AUTO")
_NUMBERS = (
    "0",
    "1",
    "-1",
    "007",
    "1.5",
    "abc",
    "+3",
    " 3",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: a digit to str.isdigit, not ASCII
    "1_000",
    "99999999999999999999",
    "-",
    3,
    True,
)


def _params() -> Iterator[tuple[str, Any, Any]]:
    load_commands()

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")
        for param in command.params:
            if isinstance(param, TyperArgument | TyperOption):
                yield f"{path} {param.name}", command, param

    yield from walk(typer.main.get_command(app), "caplet")


def _samples(annotation: Any, default: Any) -> list[Any]:
    values: list[Any] = [None]
    if default is not None and not callable(default):
        values.append(default)
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        leaf = _samples(item, None)[1:]
        return [*values, (), ("a", "b"), tuple(leaf), [leaf[0]], "not-a-list"]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        for member in annotation:
            values += [member, member.value, str(member.value).upper()]
        return [*values, "bogus", ""]
    if annotation is Path:
        return [*values, *_TEXTS, Path("p"), b"bytes", 3]
    if annotation in (int, float):
        return [*values, *_NUMBERS]
    return [*values, *_TEXTS, b"bytes", 3, True, 1.5]


PARAMS = list(_params())


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        result = runtime.coerce(value, param=param, ctx=ctx)
    except Exception as exc:
        return "error", (type(exc).__name__, str(getattr(exc, "message", exc)))
    return "value", (type(result), result)


def test_every_plain_parameter_type_is_covered() -> None:
    kinds = {
        str(get_origin(p.type_descriptor.annotation) or p.type_descriptor.annotation)
        for _, _, p in PARAMS
    }
    assert kinds >= {"<class 'str'>", "<class 'pathlib.Path'>", "<class 'int'>", "<class 'list'>"}


@pytest.mark.parametrize(("label", "command", "param"), PARAMS, ids=[p[0] for p in PARAMS])
def test_quick_coercion_answers_as_typer_does(label: str, command: Any, param: Any) -> None:
    ctx = Context(command, info_name=command.name)
    descriptor = param.type_descriptor
    quick = _QuickParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
    typers = build_runtime_param(descriptor)
    for value in _samples(descriptor.annotation, param.default):
        assert _outcome(quick, value, param, ctx) == _outcome(typers, value, param, ctx), value


def test_the_commands_use_the_quick_coercion() -> None:
    load_commands()
    scan = typer.main.get_command(app).commands["scan"]  # type: ignore[attr-defined]
    ctx = Context(scan, info_name="scan")
    params = scan.get_params(ctx)
    quick_coercion(params)  # idempotent: a parameter keeps the coercion it has
    typed = [p for p in params if isinstance(p, TyperArgument | TyperOption)]
    assert typed
    assert all(isinstance(p._runtime_param, _QuickParam) for p in typed)
