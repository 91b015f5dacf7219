"""attrs31: the scripts attrs compiles in a worker are its own templates.

lib29 listed ``attr/_make.py (_compile_and_eval)`` unchecked and attack30 found it ran
a data file's text three ways (tests/_sandbox/test_library_compile.py and
test_attack30.py hold those). attrs31 checks the script itself (``_code_attrs``): each
line one of attrs' templates with identifiers in the holes. Below, the routes tried
against that check (each refused with the same message, or held), the hook's own
compiling functions called by the plugin with a handed ``exec`` in place of a default
(found while attacking the check: on af1205e1 ``type_text`` ran the text), and the near
miss: honest attrs classes of every shape. Every route runs on the red-team host, so
only the worker is measured.
"""

from __future__ import annotations

import pytest

from caplet import PluginCallError, PluginHost
from tests.conftest import PluginFactory

SOURCE = """\
import builtins
import linecache
import types
from pathlib import Path

import attr
import attrs
from attr import _make

HERE = Path(__file__).parent


class Sneaky(str):
    def __format__(self, spec):
        return (HERE / "name.txt").read_text()


class Calls(attrs.Converter):
    def _fmt_converter_call(self, attr_name, value_var):
        return (HERE / "expr.txt").read_text()


def create_functions(config):
    def run(how):
        text = (HERE / "expr.txt").read_text()
        alias = (HERE / "alias.txt").read_text()
        if how == "name":
            name = (HERE / "name.txt").read_text()
            return attr.make_class("P", {name: attr.ib(alias="a")}, repr=False, eq=False)(1)
        if how == "name_format":
            return attr.make_class("P", [Sneaky("a")], repr=False, eq=False)(1).a
        if how == "repr_ns":
            ns = (HERE / "ns.txt").read_text()
            return repr(attr.make_class("P", ["a"], repr_ns=ns)(1))
        if how == "converter_subclass":
            made = attr.make_class("P", {"a": attr.ib(converter=Calls(int))})
            return made(1).a
        if how == "transformer":
            def widen(cls, fields):
                return [f.evolve(alias=alias) for f in fields]

            bare = type("P", (), {"__annotations__": {"a": int}})
            return attrs.define(field_transformer=widen)(bare)(1).a
        if how == "init_patched":
            _make._attrs_to_init_script = lambda *a: (text, {}, {})
            return attr.make_class("P", ["a"])(1).a
        if how == "factory_patched":
            _make._INIT_FACTORY_PAT = text + " or __attr_factory_%s"
            return attr.make_class("P", {"z": attr.ib(factory=list)})().z
        if how == "loads_compiler":
            # attrs' lines only, but one loads a name no parameter binds: the builtin
            # exec, so the code names a compiler and may call one (names_compiler).
            space = {"__attr_converter_a": getattr(builtins, (HERE / "fn.txt").read_text())}
            lines = [
                "def __init__(self, a):",
                "    self.b = exec",
                "    self.a = __attr_converter_a(a)",
            ]
            _make._compile_and_eval("\\n".join(lines), space, None, "<attrs generated init x>")
            return space["__init__"](types.SimpleNamespace(), text)
        if how == "loads_compiler_nfkc":
            # The same, spelled in fullwidth letters: Python reads a name as its NFKC form.
            space = {"__attr_converter_a": getattr(builtins, (HERE / "fn.txt").read_text())}
            lines = [
                "def __init__(self, a):",
                "    self.b = \\uff45\\uff58\\uff45\\uff43",
                "    self.a = __attr_converter_a(a)",
            ]
            _make._compile_and_eval("\\n".join(lines), space, None, "<attrs generated init x>")
            return space["__init__"](types.SimpleNamespace(), text)
        if how == "other_filename":
            space = {}
            _make._compile_and_eval(
                "def __init__(self, a):\\n    self.a = a\\n", space, None, _make.__file__
            )
            return "compiled"
        if how == "bytes_cookie":
            space = {}
            _make._compile_and_eval(
                b"# coding: utf-7\\n" + text.encode(), space, None, "<attrs generated x>"
            )
            return "compiled"
        if how == "linecache":
            # A payload seeded where attrs caches its script: only tracebacks read it.
            name = "<attrs generated methods plugin.Seeded>"
            linecache.cache[name] = (len(text), None, [text], name)
            return repr(attr.make_class("Seeded", ["a"])(1))
        if how == "own_type_text":
            from caplet._sandbox._code_text import type_text

            handed = getattr(builtins, (HERE / "fn.txt").read_text())
            return type_text(("(" + text + ")").encode(), {}, _postponed=handed)
        if how == "own_attrs_script":
            from caplet._sandbox._code_attrs import attrs_script

            handed = getattr(builtins, (HERE / "fn.txt").read_text())
            return attrs_script(text, "<attrs generated x>", _line=handed)
        return None

    return {"main": {"run": run}}
"""

FILES = {
    "expr.txt": "(_ for _ in ()).throw(SystemError(__import__('ctypes').sizeof("
    "__import__('ctypes').c_int)))",
    "alias.txt": "b=__import__('ctypes').sizeof(__import__('ctypes').c_int)",
    # An attribute's name: `self.<name> = a` in __init__.
    "name.txt": "a = a; raise SystemError(__import__('ctypes').sizeof("
    "__import__('ctypes').c_int)); self.b",
    # repr_ns: literal text of __repr__'s f-string, so a replacement field runs.
    "ns.txt": '{(_ for _ in ()).throw(SystemError(__import__("ctypes").sizeof('
    '__import__("ctypes").c_int)))}',
    "fn.txt": "exec",
}

_ATTRS_SCRIPT = r"attr/_make.py \(_compile_and_eval\) was handed a script that is none attrs writes"


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


@pytest.mark.security
@pytest.mark.parametrize(
    "how",
    [
        "name",
        "name_format",
        "repr_ns",
        "converter_subclass",
        "transformer",
        "init_patched",
        "factory_patched",
        "loads_compiler",
        "loads_compiler_nfkc",
        "other_filename",
        "bytes_cookie",
    ],
)
def test_attrs_compiles_only_its_own_templates(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """Held by attrs31's check (each route's text would otherwise have run: a name, a
    str subclass's ``__format__``, ``repr_ns``, a ``Converter`` subclass's call text, a
    field transformer's alias, a rebound script maker or constant, attrs' lines loading
    ``exec``, attrs' text under another file name, a coding cookie)."""
    make_plugin("attrs31", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("attrs31", consent=True)
    with pytest.raises(PluginCallError, match=_ATTRS_SCRIPT):
        host.call("attrs31", "main.run", how=how)


@pytest.mark.security
def test_attrs_cached_script_is_no_code(make_plugin: PluginFactory, host: PluginHost) -> None:
    """Held: a payload seeded in linecache under attrs' file name is what a traceback
    shows, never what compiles: attrs compiles the script it wrote."""
    make_plugin("attrs31", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("attrs31", consent=True)
    assert host.call("attrs31", "main.run", how="linecache") == "Seeded(a=1)"


@pytest.mark.security
@pytest.mark.parametrize("how", ["own_type_text", "own_attrs_script"])
def test_the_hooks_own_compilers_called_with_a_handed_exec(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """The hook lets its own functions compile (``type_text`` parses an annotation,
    ``attrs_script`` a script); called by the plugin with a handed ``exec`` as a default
    (``_postponed``, ``_line``), their frame ran it: on af1205e1 ``type_text`` raised
    "SystemError: 4". Now their frame compiles only with every default as sealed."""
    make_plugin("attrs31", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("attrs31", consent=True)
    frame = {
        "own_type_text": r"caplet/_sandbox/_code_text.py \(type_text\)",
        "own_attrs_script": r"caplet/_sandbox/_code_attrs.py \(attrs_script\)",
    }[how]
    with pytest.raises(PluginCallError, match=frame + " is a library's code that compiles"):
        host.call("attrs31", "main.run", how=how)


NEAR = """\
import functools

import attr
import attrs
import jsonschema


def positive(instance, attribute, value):
    if value < 0:
        raise ValueError(attribute.name)


@attr.s(repr_ns="outer.ns", order=True, hash=True)
class Old:
    x = attr.ib()
    _y = attr.ib(default=1)
    z = attr.ib(factory=list, repr=lambda v: "Z")
    w = attr.ib(converter=int, default="3", validator=positive)
    v = attr.ib(init=False, default=5)
    o = attr.ib(alias="oo", default="a", eq=str.lower)
    k = attr.ib(kw_only=True, default=2)


@attrs.define
class New:
    a: int
    b: list = attrs.field(factory=list)
    c: int = attrs.field(default=attrs.Factory(lambda self: self.a, takes_self=True))
    d: int = attrs.field(
        converter=attrs.Converter(lambda v, s, f: v + 1, takes_self=True, takes_field=True),
        default=1,
    )
    eval: int = 0

    def __attrs_pre_init__(self, a, b, c, d, eval):
        pass

    def __attrs_post_init__(self):
        self.b.append(self.a)

    @functools.cached_property
    def twice(self):
        return self.a * 2


@attrs.frozen(cache_hash=True)
class Frozen:
    a: int
    b: int = attrs.field(init=False, factory=int)


@attr.s(auto_exc=True)
class Failure(Exception):
    code = attr.ib()


def create_functions(config):
    def run():
        fields = {"a": attr.ib(alias="x"), "_b": attr.ib(default=1)}
        made = attr.make_class("P", fields, frozen=True, slots=True)
        new = New(1)
        jsonschema.validate({"n": 1}, {"type": "object", "properties": {"n": {"type": "integer"}}})
        return [
            repr(Old(1, oo="A")),
            Old(1) < Old(2),
            Old(1, oo="A") == Old(1, oo="a"),
            new.b,
            new.d,
            new.twice,
            hash(Frozen(1)) == hash(Frozen(1)),
            Failure(3).args,
            made(x=4).a,
            repr(made(x=4)),
        ]

    return {"main": {"run": run}}
"""


def test_honest_attrs_classes_still_build(make_plugin: PluginFactory, host: PluginHost) -> None:
    """Near miss: ``attr.s`` (repr_ns, order, hash, alias, converter, validator, factory,
    eq key, kw_only, init=False), ``attrs.define`` (Converter taking self and field, a
    field named ``eval``, pre and post init, a cached property), frozen with a cached hash,
    an exception, ``make_class`` frozen and slotted, and jsonschema's validators."""
    make_plugin("near31", source=NEAR)
    host.discover()
    assert host.enable("near31", consent=True)
    assert host.call("near31", "main.run") == [
        "outer.ns.Old(x=1, _y=1, z=Z, w=3, v=5, o='A', k=2)",
        True,
        True,
        [1],
        2,
        2,
        True,
        [3],
        4,
        "P(a=4, _b=1)",
    ]
