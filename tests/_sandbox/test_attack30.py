"""attack30: today's two worker changes (memfd29, lib29) attacked in real workers.

lib29 lets a few generators compile because the text they make is fixed strings and
checked names: the standard library's dataclasses, ``namedtuple``, gettext's ``c2py`` and
``ast.parse``, and typing_inspection's ``is_*`` makers. What makes that text is the
module's globals and the builtins, each the plugin's to rebind: on ca7ba83c each route
below ran ``ctypes`` from a data file (``SystemError: 4``, or ``4``) with no ``exec``,
``eval`` or ``compile`` named in the plugin. Every route runs on the red-team host, so
only the worker is measured.
"""

from __future__ import annotations

import pytest

from caplet import PluginCallError, PluginHost
from tests.conftest import PluginFactory

SOURCE = """\
import builtins
import collections
import dataclasses
import sys
from pathlib import Path

HERE = Path(__file__).parent


def handed(text):
    return getattr(builtins, (HERE / "fn.txt").read_text())(text)


def deep(text):
    try:
        return deep(text)
    except RecursionError:
        try:
            handed(text)
        except BaseException as exc:
            return type(exc).__name__
        return "ran"


def create_functions(config):
    def run(how):
        text = (HERE / "expr.txt").read_text()
        raised = "raise SystemError(" + text + ")"
        if how == "inspection_dedent":
            from typing_inspection import typing_objects

            typing_objects.dedent = lambda _text: (HERE / "fn_def.txt").read_text()
            return typing_objects._compile_identity_check_function("Any", "is_x")(1)
        if how == "dataclass_patched":
            dataclasses._field_assign = lambda frozen, name, value, self_name: raised
            return dataclasses.make_dataclass("P", ["a"])(1).a
        if how == "dataclass_code":
            dataclasses._field_assign.__code__ = (lambda frozen, name, value, self_name: (
                "raise SystemError(__import__('ctypes').sizeof(__import__('ctypes').c_int))"
            )).__code__
            return dataclasses.make_dataclass("P", ["a"])(1).a
        if how == "ast_flag":
            import ast
            import types

            ast.PyCF_ONLY_AST = 0
            return types.FunctionType(ast.parse(raised), {})()
        if how == "gettext_parse":
            import gettext

            gettext._parse = lambda tokens, priority=-1: (text, "")
            return gettext.c2py("n")(1)
        if how == "gettext_ops":
            import gettext

            gettext._c2py_ops["||"] = "or " + text + " or"
            return gettext.c2py("n || n")(0)
        if how == "namedtuple_builtins":
            class Lying(str):
                def isidentifier(self):
                    return True

            # A default value is run when namedtuple evaluates its __new__; no builtins
            # there, so the payload climbs from a tuple (the comment ends the text).
            field = Lying("a=().__class__.__base__.__subclasses__().__len__():0#")
            saved = builtins.map, builtins.type
            builtins.map = lambda f, xs: xs
            builtins.type = lambda *a: str if len(a) == 1 else saved[1](*a)
            try:
                made = collections.namedtuple("P", [field])
            finally:
                builtins.map, builtins.type = saved
            return made.__new__.__defaults__
        if how == "attrs_direct":
            from attr._make import _compile_and_eval

            space = {}
            _compile_and_eval("r = " + text, space)
            return space["r"]
        if how == "attrs_repr_patched":
            import attr
            from attr import _make

            _make._make_repr_script = lambda attrs, ns: (raised, {})
            return repr(attr.make_class("P", ["a"])(1))
        if how == "recursion":
            return deep(text)
        return None

    return {"main": {"run": run}}
"""

FILES = {
    "expr.txt": "__import__('ctypes').sizeof(__import__('ctypes').c_int)",
    "fn.txt": "exec",
    # Not the text typing_inspection makes: a function, then a statement of its own.
    "fn_def.txt": "def is_x(obj):\n    return 0\nraise SystemError("
    "__import__('ctypes').sizeof(__import__('ctypes').c_int))\n",
}

_ATTRS_SCRIPT = r"attr/_make.py \(_compile_and_eval\) was handed a script that is none attrs writes"
_REBOUND = (
    r"makes code from its module's functions and the builtins, and one of them is no "
    r"longer what was imported"
)


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


@pytest.mark.security
@pytest.mark.parametrize(
    ("how", "frame"),
    [
        ("dataclass_patched", r"dataclasses.py \(_create_fn\)"),
        ("dataclass_code", r"dataclasses.py \(_create_fn\)"),
        ("ast_flag", r"ast.py \(parse\)"),
        ("gettext_parse", r"gettext.py \(c2py\)"),
        ("gettext_ops", r"gettext.py \(c2py\)"),
        ("namedtuple_builtins", r"collections/__init__.py \(namedtuple\)"),
    ],
)
def test_a_generator_whose_module_was_rebound_compiles_nothing(
    make_plugin: PluginFactory, host: PluginHost, how: str, frame: str
) -> None:
    """On ca7ba83c: "SystemError: 4" (dataclass_patched, dataclass_code, ast_flag), "4"
    (gettext_parse, gettext_ops: a dict's contents, not a name, rebound), the count of
    object's subclasses (namedtuple_builtins)."""
    make_plugin("rebinds", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("rebinds", consent=True)
    with pytest.raises(PluginCallError, match=frame + " " + _REBOUND):
        host.call("rebinds", "main.run", how=how)


@pytest.mark.security
def test_a_listed_librarys_generator_compiles_only_its_own_text(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """typing_inspection's ``dedent`` rebound to return the plugin's data: the names were
    identifiers, so lib29's check passed; on ca7ba83c "SystemError: 4"."""
    make_plugin("rebinds", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("rebinds", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"typing_inspection/typing_objects.py \(_compile_identity_check_function\) "
        r"was handed a name that is no identifier, or made other text than its own",
    ):
        host.call("rebinds", "main.run", how="inspection_dedent")


@pytest.mark.security
@pytest.mark.parametrize("how", ["attrs_direct", "attrs_repr_patched"])
def test_attrs_compiles_no_text_it_did_not_make(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """On af1205e1: answered 4 (attrs_direct) or raised "SystemError: 4"
    (attrs_repr_patched); closed by attrs31 (the script attrs compiles is checked)."""
    make_plugin("rebinds", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("rebinds", consent=True)
    with pytest.raises(PluginCallError, match=_ATTRS_SCRIPT):
        host.call("rebinds", "main.run", how=how)


def test_a_hook_out_of_stack_fails_closed(make_plugin: PluginFactory, host: PluginHost) -> None:
    """Held: with the stack exhausted, a handed exec raises (the hook's RecursionError is
    the event's answer: an audit hook that raises aborts the operation) and nothing ran."""
    make_plugin("rebinds", source=SOURCE, files=FILES)
    host.discover()
    assert host.enable("rebinds", consent=True)
    assert host.call("rebinds", "main.run", how="recursion") in {"RecursionError", "RuntimeError"}


NEAR = """\
import ast
import builtins
import collections
import dataclasses
import gettext

from typing_inspection import typing_objects


def create_functions(config):
    def run():
        builtins.attack30_added = 1  # a new name in the builtins is no matter
        gettext.attack30_added = 1
        made = dataclasses.make_dataclass("P", [("a", int), ("b", int, 2)], frozen=True)
        pair = collections.namedtuple("Pair", "x y", defaults=(0,))
        plural = gettext.c2py("n != 1")
        tree = ast.parse("x = 1")
        check = typing_objects._compile_isinstance_check_function("TypeVar", "is_tv")
        return [made(1).b, pair(3).y, plural(2), type(tree).__name__, check(1)]

    return {"main": {"run": run}}
"""


def test_the_checked_generators_still_make_code(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: each generator, with a name added to its module and to the builtins."""
    make_plugin("near30", source=NEAR)
    host.discover()
    assert host.enable("near30", consent=True)
    assert host.call("near30", "main.run") == [2, 0, 1, "Module", False]


NATIVE = """\
import ctypes
import errno
import mmap
import os


def create_functions(config):
    def run(how):
        try:
            if how == "shmget":
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.shmget(0, 4096, 0o1600) == -1:
                    return errno.errorcode[ctypes.get_errno()]
                return "made"
            if how == "tmpfile":
                fd = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
                os.write(fd, b"\\xb8\\x2a\\x00\\x00\\x00\\xc3" + bytes(4090))
                mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_EXEC)
            if how == "devzero":
                fd = os.open("/dev/zero", os.O_RDWR)
                prot = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
                mmap.mmap(fd, 4096, mmap.MAP_SHARED, prot)
            if how == "pipe":
                read, _write = os.pipe()
                mmap.mmap(read, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_EXEC)
        except OSError as exc:
            return errno.errorcode[exc.errno]
        return "mapped"

    return {"main": {"run": run}}
"""


@pytest.mark.security
@pytest.mark.parametrize(
    ("how", "refused"),
    [
        ("shmget", {"EPERM"}),  # seccomp: host-wide IPC is on no worker's list
        ("tmpfile", {"EPERM"}),  # an O_TMPFILE is on /tmp's noexec mount
        ("devzero", {"EPERM", "ENOENT", "EACCES"}),  # /dev is a noexec tmpfs
        ("pipe", {"EPERM", "ENODEV"}),  # pipefs is noexec (SB_I_NOEXEC)
    ],
)
def test_no_other_file_maps_the_plugins_bytes_executable(
    make_plugin: PluginFactory, host: PluginHost, how: str, refused: set[str]
) -> None:
    """Held (memfd29's rows, the routes it did not list): SysV shared memory (shmat's
    SHM_EXEC), an unnamed O_TMPFILE, a shared mapping of /dev/zero, a pipe."""
    make_plugin("native30", source=NATIVE)
    host.discover()
    assert host.enable("native30", consent=True)
    assert host.call("native30", "main.run", how=how) in refused
