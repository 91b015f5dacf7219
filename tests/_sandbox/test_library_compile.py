"""lib29: a library's frame compiles only by an allow-list, as the standard library's do.

attack27's open row: a frame outside the standard library could compile whenever its own
code named ``exec``, ``eval`` or ``compile``, and jinja2's does. A template is Python's
attribute and call syntax: ``{{ cycler.__init__.__globals__.__builtins__ }}`` reaches
any module, so a template read from the plugin's data (or written in its source, where
the scanner reads it as a string, not as code) ran code no reviewer read. Each route
below answered 4 (``ctypes.sizeof(c_int)``) on f0500b3c.
"""

from __future__ import annotations

import pytest

from caplet import PluginCallError, PluginHost
from tests.conftest import PluginFactory

PAGE = (
    "{% set b = cycler.__init__.__globals__.__builtins__ %}"
    "{% set c = b.__import__('ctypes') %}{{ c.sizeof(c.c_int) }}"
)

ROUTES = (
    '''\
from pathlib import Path

import attr
import jinja2
import jinja2.nativetypes
import jinja2.sandbox

HERE = Path(__file__).parent

#: Written in the source: the scanner reads a string, not the Python it is.
LITERAL = "'''
    + PAGE
    + """"


class Open(jinja2.sandbox.SandboxedEnvironment):
    def is_safe_attribute(self, obj, attr, value):
        return True


def create_functions(config):
    def run(how):
        page = (HERE / "page.txt").read_text()
        if how == "template":
            return jinja2.Template(page).render()
        if how == "from_string":
            return jinja2.Environment().from_string(page).render()
        if how == "loader":
            loader = jinja2.FileSystemLoader(str(HERE / "templates"))
            return jinja2.Environment(loader=loader).get_template("page.html").render()
        if how == "native":
            return str(jinja2.nativetypes.NativeEnvironment().from_string(page).render())
        if how == "sandbox_widened":
            return Open().from_string(page).render()
        if how == "sandbox_patched":
            jinja2.sandbox.SandboxedEnvironment.is_safe_attribute = Open.is_safe_attribute
            return jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(page).render()
        if how == "literal":
            return jinja2.Template(LITERAL).render()
        if how == "inspection":
            from typing_inspection import typing_objects

            name = (HERE / "name.txt").read_text()
            return typing_objects._compile_identity_check_function("Any", name)(1)
        if how == "attrs_alias":
            made = attr.make_class("P", {"a": attr.ib(alias=(HERE / "alias.txt").read_text())})
            return made(1).a
        return None

    return {"main": {"run": run}}
"""
)

FILES = {
    "page.txt": PAGE,
    "templates/page.html": PAGE,
    # typing_inspection dedents the text it makes, so the lines carry its indent.
    "name.txt": "f(obj): pass\n    raise SystemError(__import__('ctypes').sizeof("
    "__import__('ctypes').c_int))\n    def g",
    "alias.txt": "b=__import__('ctypes').sizeof(__import__('ctypes').c_int)",
}

_JINJA = (
    r"jinja2/environment.py \(Environment._compile\) compiles a template to Python and runs "
    r"it: a template reaches any module through its globals"
)


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


@pytest.mark.security
@pytest.mark.parametrize(
    "how",
    [
        "template",
        "from_string",
        "loader",
        "native",
        "sandbox_widened",
        "sandbox_patched",
        "literal",
    ],
)
def test_no_template_compiles_in_a_worker(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """On f0500b3c each answered "4" (the template imported ctypes and called it)."""
    make_plugin("pages", source=ROUTES, files=FILES)
    host.discover()
    assert host.enable("pages", consent=True)
    with pytest.raises(PluginCallError, match=_JINJA):
        host.call("pages", "main.run", how=how)


@pytest.mark.security
def test_a_library_generator_is_handed_no_name_of_the_plugins_data(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """typing_inspection (pydantic's, so in every runtime) makes its ``is_*`` checks from a
    function name put into fixed text; a name read from a data file ran (on f0500b3c the
    call failed with "SystemError: 4", raised by the text)."""
    make_plugin("pages", source=ROUTES, files=FILES)
    host.discover()
    assert host.enable("pages", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"typing_inspection/typing_objects.py \(_compile_identity_check_function\) "
        r"was handed a name that is no identifier",
    ):
        host.call("pages", "main.run", how="inspection")


NEAR = """\
import attr
import pydantic
from typing_inspection import typing_objects


@attr.s(auto_attribs=True)
class Point:
    x: int
    y: int = 2


class Model(pydantic.BaseModel):
    n: int


def create_functions(config):
    def run():
        check = typing_objects._compile_identity_check_function("Any", "is_any_again")
        made = attr.make_class("P", ["a", "b"])(1, b=3)
        return [Point(1).y, made.b, Model(n="5").n, check(1)]

    return {"main": {"run": run}}
"""


def test_the_libraries_listed_generators_still_make_code(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: attrs' methods (a class body, ``make_class``), pydantic's model (its
    import compiles typing_inspection's checks) and typing_inspection's generator handed
    identifiers."""
    make_plugin("near", source=NEAR)
    host.discover()
    assert host.enable("near", consent=True)
    assert host.call("near", "main.run") == [2, 3, 5, False]


@pytest.mark.security
def test_an_attrs_alias_of_the_plugins_data_runs_nothing(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """On af1205e1 answered 4 (the alias's default expression called ctypes); closed by
    attrs31: the script attrs compiles must be its own templates with identifiers."""
    make_plugin("pages", source=ROUTES, files=FILES)
    host.discover()
    assert host.enable("pages", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"attr/_make.py \(_compile_and_eval\) was handed a script that is none attrs "
        r"writes",
    ):
        host.call("pages", "main.run", how="attrs_alias")
