"""attack26 (and the routes found beside it): code no reviewer read, run by the runtime.

``_code_origin``'s audit hook asked only which file the innermost Python frame belongs to,
and took any runtime frame (or any ``<frozen ...>`` one) as the runtime's own use. Every
route below ran text or bytecode from the plugin's data files on the main of 4ecdd16c
(each call answered what the payload computed: ``ctypes.sizeof(c_int)``, 4, or 42).
"""

from __future__ import annotations

import dataclasses
import dis
import io
import marshal
import zipfile
from pathlib import Path
from types import CodeType

import pytest

from caplet import PluginCallError, PluginHost
from caplet._sandbox import _code_origin
from tests._sandbox.conftest import EVIL
from tests.conftest import FILECONFIG_PAYLOAD, PluginFactory

ROUTES = """\
import copy
import dataclasses
import functools
import io
import json
import logging.config
import marshal
import threading
import typing
import zipimport
from pathlib import Path

HERE = Path(__file__).parent


def template():
    return 0


class Made:
    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce_ex__(self, proto):
        return (self.func, self.args)


def create_functions(config):
    def run(how):
        text = (HERE / "helpers.txt").read_text()
        if how == "typing":
            class Box:
                pass
            Box.__annotations__ = {"x": text}
            return str(typing.get_type_hints(Box, {}, {})["x"])
        if how == "logging":
            logging.config.fileConfig(io.StringIO((HERE / "log.ini").read_text()))
            return "configured"
        if how == "zipimport":
            import importlib.util
            spec = zipimport.zipimporter(str(HERE / "data.zip")).find_spec("evil")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.X
        if how == "copy_marshal":
            code = copy.copy(Made(marshal.loads, (bytes.fromhex((HERE / "code.hex").read_text()),)))
            return type(template)(code, {})()
        if how == "marshal_load":
            blob = bytes.fromhex((HERE / "code.hex").read_text())
            return type(template)(marshal.load(io.BytesIO(blob)), {})()
        if how == "copy_marshal_load":
            blob = io.BytesIO(bytes.fromhex((HERE / "code.hex").read_text()))
            return type(template)(copy.copy(Made(marshal.load, (blob,))), {})()
        if how == "copy_replace":
            shape = json.loads((HERE / "shape.json").read_text())
            fix = functools.partial(template.__code__.replace, co_consts=tuple(shape["consts"]))
            return type(template)(copy.copy(Made(fix, ())), {})()
        if how == "thread_code":
            shape = json.loads((HERE / "shape.json").read_text())
            out = []
            fix = functools.partial(template.__code__.replace, co_consts=tuple(shape["consts"]))
            worker = threading.Thread(target=lambda: out.append(copy.copy(Made(fix, ()))))
            worker.run()
            return type(template)(out[0], {})()
        if how == "frozen_code":
            import importlib._bootstrap as boot
            shape = json.loads((HERE / "shape.json").read_text())
            fix = functools.partial(template.__code__.replace, co_consts=tuple(shape["consts"]))
            return type(template)(boot._call_with_frames_removed(fix), {})()
        if how == "loader_txt":
            import helpers
            loader = type(helpers.__loader__)
            return loader("evil", str(HERE / "helpers.txt")).load_module().X
        if how == "dataclass_name":
            name = (HERE / "fields.txt").read_text()
            box = dataclasses.dataclass(init=False, repr=False)(
                type("Box", (), {"__annotations__": {name: int}})
            )
            made = box()
            return made == made
        return None

    return {"main": {"run": run}}
"""


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("evil.py", EVIL)
    return buf.getvalue()


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


FILES = {
    "helpers.txt": "[__import__('ctypes').sizeof(__import__('ctypes').c_int), int][1]",
    "fields.txt": "a,__import__('ctypes').sizeof(__import__('ctypes').c_int)",
    "helpers.py": "V = 1\n",
    "log.ini": FILECONFIG_PAYLOAD,
    "shape.json": '{"consts": [null, 42]}',
    "code.hex": marshal.dumps((lambda: 42).__code__).hex(),
}

#: Each route, and what the refusal says.
REFUSED = {
    "typing": r"typing.py \(ForwardRef.__init__\) was handed annotation text that calls",
    "logging": r"logging/config.py \(_install_handlers\) compiles the text it is given",
    "zipimport": r"<frozen zipimport> \(_compile_source\) compiles or unmarshals",
    "copy_marshal": r"copy.py \(_reconstruct\) made a code object \(marshal.loads\)",
    "copy_replace": r"copy.py \(_reconstruct\) made a code object \(types.CodeType",
    # lib29: marshal.load (of a file) is its own audit event, with no arguments
    "marshal_load": r"plugin.py \(create_functions.<locals>.run\) made a code object "
    r"\(marshal.load\)",
    "copy_marshal_load": r"copy.py \(_reconstruct\) made a code object \(marshal.load\)",
    "thread_code": r"copy.py \(_reconstruct\) made a code object",
    "frozen_code": r"<frozen importlib._bootstrap> \(_call_with_frames_removed\) made a code",
    "loader_txt": r"helpers.txt is no Python source: importlib runs only .py files",
    "dataclass_name": r"a dataclass field's name is no identifier",
}


@pytest.fixture
def routes(make_plugin: PluginFactory, host: PluginHost) -> PluginHost:
    directory = Path(str(make_plugin("routes", source=ROUTES, files=FILES)))
    (directory / "data.zip").write_bytes(_zip())
    host.discover()
    assert host.enable("routes", consent=True)
    return host


@pytest.mark.security
@pytest.mark.parametrize("how", sorted(REFUSED))
def test_text_or_bytecode_of_the_plugins_data_never_runs_through_the_runtime(
    routes: PluginHost, how: str
) -> None:
    """On 4ecdd16c each call answered what its payload computed (4 or 42)."""
    with pytest.raises(PluginCallError, match=REFUSED[how]):
        routes.call("routes", "main.run", how)


OWN = """\
from __future__ import annotations

import ast
import collections
import dataclasses
import inspect
import types
import typing
from typing import Annotated


def Meta(low):
    return ("meta", low)


@dataclasses.dataclass
class Point:
    x: Annotated[int, Meta(0)]
    y: int = 2


def create_functions(config):
    def run():
        @types.coroutine
        def gen():
            yield

        import asyncio
        import fractions

        async def later():
            return 2

        made = dataclasses.make_dataclass("Made", ["a", ("b", int)])
        pair = collections.namedtuple("Pair", "left right")
        hints = typing.get_type_hints(Point, include_extras=True)
        sig = str(inspect.signature(pow))
        return [
            type(gen).__name__,
            str(fractions.Fraction(1, 2)),
            asyncio.run(later()),
            made(1, 2).b,
            pair(1, 2).right,
            str(hints["x"]),
            str(hints["y"]),
            str(inspect.get_annotations(Point, eval_str=True)["y"]),
            type(ast.parse("x = 1")).__name__,
            sig,
        ]

    return {"main": {"run": run}}
"""


def test_the_runtimes_own_generators_still_run_during_a_call(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: dataclasses (made in the class body and by ``make_dataclass``),
    namedtuple, ``typing.get_type_hints`` over annotations postponed by ``from __future__
    import annotations`` (one calls a function: it is a string constant of the plugin's
    source), ``inspect`` (annotations, a builtin's text signature), ``ast.parse``,
    ``types.coroutine``, a standard module's .pyc imported now, asyncio."""
    make_plugin("own", source=OWN)
    host.discover()
    assert host.enable("own", consent=True)
    assert host.call("own", "main.run") == [
        "function",
        "1/2",
        2,
        2,
        2,
        "typing.Annotated[int, ('meta', 0)]",
        "<class 'int'>",
        "<class 'int'>",
        "Module",
        "(base, exp, mod=None)",
    ]


TAMPERS = """\
import gc

import caplet._sandbox._code_origin as guard


def template():
    return 0


def attempt():
    return type(template)(template.__code__.replace(co_consts=(None, 42)), {})()


def create_functions(config):
    def run(how):
        if how == "tables":
            for name in dir(guard):
                value = getattr(guard, name)
                if isinstance(value, frozenset):
                    setattr(guard, name, frozenset())
            guard._STDLIBS = ()
            # attack24's forged source under a snapshot path: importlib's compile went
            # unchecked once ``_IMPORTLIB`` was empty.
            import helpers

            loader = type(helpers.__loader__)
            loader.get_data = lambda self, path: b"X = 42\\n"
            return loader("forged", helpers.__file__).load_module().X
        if how == "cells":
            # A refusal's traceback holds the hook's frame: widen every cell and every
            # mutable value its locals reach.
            try:
                attempt()
            except RuntimeError as exc:
                tb = exc.__traceback__
            while tb is not None:
                for value in list(tb.tb_frame.f_locals.values()):
                    for cell in getattr(value, "__closure__", None) or ():
                        if isinstance(cell.cell_contents, tuple):
                            cell.cell_contents = ("/",)
                    if isinstance(value, (set, dict, list)):
                        value.clear()
                tb = tb.tb_next
            return attempt()
        if how == "defaults":
            hooks = [f for f in gc.get_objects()
                     if type(f) is type(template) and f.__code__ is guard._hook.__code__]
            for hook in hooks:
                hook.__defaults__ = ()
            return attempt()
        return None

    return {"main": {"run": run}}
"""


@pytest.mark.security
@pytest.mark.parametrize("how", ["tables", "cells", "defaults"])
def test_the_guard_is_not_the_plugins_to_change(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """attack26: the hook read its tables as module globals (``import`` the module and
    rebind them), and an exception it raised carried its frame, whose locals held its
    closures (``cell.cell_contents`` is writable, with no audit event): ``runtime``
    widened to ``/`` and a code object the plugin made ran. The hook now reads only its
    own defaults, immutable, and setting them is refused."""
    make_plugin("tampers", source=TAMPERS, files={"helpers.py": "X = 0\n"})
    host.discover()
    assert host.enable("tampers", consent=True)
    expected = {
        "tables": r"helpers.py: the source importlib was handed is not that file's content",
        "cells": r"made a code object \(types.CodeType, code.replace\)",
        "defaults": r"__defaults__ of caplet's code-origin guard is not the plugin's to set",
    }[how]
    with pytest.raises(PluginCallError, match=expected):
        host.call("tampers", "main.run", how)


#: What a sealed function's default may be: immutable, or a builtin that holds nothing.
_IMMUTABLE = (
    str,
    int,
    bytes,
    bool,
    tuple,
    frozenset,
    type,
    type(None),
    type(len),  # builtin function
    type(str.isidentifier),  # method descriptor
    type(vars(dataclasses.Field)["name"]),  # member descriptor (a slot)
    CodeType,  # the hook's own nested compiles are known by their code
)


def test_the_hooks_functions_read_nothing_the_plugin_can_change() -> None:
    """Every function the hook runs reads no global, no builtin and no cell, makes no
    nested code (a comprehension's cell), and has only immutable defaults or other
    sealed functions: a plugin that imports the module, or reaches the hook's frame
    through a refusal's traceback, changes nothing it reads."""
    sealed = set(_code_origin._SEALED)
    for function in _code_origin._SEALED:
        code = function.__code__
        assert not code.co_freevars, function
        assert not code.co_cellvars, function
        assert not [c for c in code.co_consts if isinstance(c, CodeType)], function
        loads = {i.opname for i in dis.get_instructions(function)} & {
            "LOAD_GLOBAL",
            "LOAD_NAME",
            "LOAD_DEREF",
            "LOAD_CLASSDEREF",
            "STORE_GLOBAL",
        }
        assert not loads, (function, loads)
        for default in function.__defaults__ or ():
            # By identity: _code_intact's records hold the namespaces they compare (attack30),
            # so a default may be unhashable.
            assert any(default is other for other in sealed) or isinstance(default, _IMMUTABLE), (
                function,
                default,
            )
            if isinstance(default, tuple):
                assert all(isinstance(item, _IMMUTABLE) for item in default), default


PYDANTIC = """\
from __future__ import annotations

from typing import Annotated, Optional

import pydantic
from pydantic import BaseModel, Field


class Item(BaseModel):
    n: Annotated[int, Field(gt=0)]
    name: Optional[str] = None
    tags: list[str] = []


@pydantic.validate_call
def add(a: int, b: Annotated[int, Field(ge=0)] = 1) -> int:
    return a + b


def create_functions(config):
    def run():
        return [Item(n=3, tags=["a"]).model_dump(), add(1, 2), Item.model_json_schema()["title"]]

    return {"main": {"run": run}}
"""


def test_a_pydantic_model_with_postponed_annotations_still_validates(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: pydantic (a runtime library) evaluates each field's annotation text
    through ``typing.ForwardRef``; ``Annotated[int, Field(gt=0)]`` calls, and is a
    string constant of the plugin's source with its annotations postponed."""
    make_plugin("pyd", source=PYDANTIC)
    host.discover()
    assert host.enable("pyd", consent=True)
    assert host.call("pyd", "main.run") == [{"n": 3, "name": None, "tags": ["a"]}, 3, "Item"]
