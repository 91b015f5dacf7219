"""attack27: routes past the code-origin hook of a0e3d91b (``_code_origin``).

Each plugin below scans with no danger finding (``caplet scan --mode plugin``: at most
CPL-FS-002 warnings for reading its own files; a library shipped as an ELF file is
CPL-NAT-002, so the native ones ship it as hex text) and, on a0e3d91b, ran text or native
code from one of its data files in a strict worker (the host runs with the red-team
switch, so only the worker is measured).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from caplet import PluginCallError, PluginHost
from tests._sandbox.conftest import EVIL
from tests.conftest import PluginFactory

#: zipimport's module-level ``_compile_source(pathname, source)`` compiles any text; the
#: hook checked only that ``pathname`` was spelled inside the runtime (``os.__file__``
#: is), never the text. A loader whose ``get_code`` answers that code object, and
#: importlib's own ``exec_module`` runs it.
ZIP_COMPILE = """\
import os
import zipimport
from pathlib import Path

import helpers

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        loader = type(helpers.__loader__)

        class Precompiled(loader):
            def get_code(self, name):
                text = (HERE / "helpers.txt").read_bytes()
                return zipimport._compile_source(os.__file__, text)

        module = type(os)("evil")
        Precompiled("evil", helpers.__file__).exec_module(module)
        return module.X

    return {"main": {"run": run}}
"""


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


@pytest.mark.security
def test_zipimports_compile_is_handed_no_text_of_the_plugins(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """On a0e3d91b the call answered 4 (``ctypes.sizeof(c_int)``, from helpers.txt)."""
    make_plugin("zipc", source=ZIP_COMPILE, files={"helpers.txt": EVIL, "helpers.py": "V = 1\n"})
    host.discover()
    assert host.enable("zipc", consent=True)
    zipped = r"<frozen zipimport> \(_compile_source\) compiles or unmarshals: the worker"
    with pytest.raises(PluginCallError, match=zipped):
        host.call("zipc", "main.run")


#: ``typing.get_type_hints`` evaluates a class's annotations in the namespace of the
#: module its ``__module__`` names (any module loaded: ``ctypes``), and the hook lets
#: ForwardRef compile any "inert" text (names, attributes, subscripts). But a subscript
#: runs the object's ``__getitem__``: ``cdll["/tmp/lib_n.so"]`` is ``CDLL(path)``, a
#: ``dlopen`` of a library the plugin ships as hex text, written to a memfd (the worker's
#: /tmp and snapshot are mounted noexec; a memfd is not), whose constructor runs native
#: code no one read. Everything (the module, the text, the library) comes from data files.
NATIVE = """\
import json
import os
import typing
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        shape = json.loads((HERE / "shape.json").read_text())
        fd = os.memfd_create("n")
        os.write(fd, bytes.fromhex((HERE / "blob.hex").read_text()))

        class Box:
            pass

        Box.__module__ = shape["module"]
        Box.__annotations__ = {"x": shape["text"].replace("FD", str(fd))}
        typing.get_type_hints(Box)
        return os.path.exists(shape["flag"])

    return {"main": {"run": run}}
"""

SHAPE = json.dumps(
    {
        "module": "ctypes",
        "text": 'cdll["/proc/self/fd/FD"]',
        "flag": "/tmp/native-ran",
    }
)


#: The guard's refusal (as root), or the kernel's refusal of the memfd the library is
#: written to (seccomp answers memfd_create with EPERM: as an unprivileged user first, in
#: every worker since memfd29, tests/_sandbox/test_memfd29.py).
_REFUSED_DLOPEN = r"ctypes.dlopen of '/proc/self/fd/\d+' is no file|Operation not permitted"
_REFUSED_EXTENSION = r"an extension module '/proc/self/fd/\d+' is no|Operation not permitted"


@pytest.fixture(scope="module")
def library() -> bytes:
    """A shared object the plugin ships (as hex text): a copy of one of this runtime's own
    extension modules, so that no compiler is needed. The guard refuses before anything
    is loaded; on a0e3d91b it loaded (a library with a constructor that made
    /tmp/native-ran, built with gcc, answered True)."""
    for name in ("_ctypes", "_json", "_struct", "array", "math", "select", "_decimal"):
        path = getattr(importlib.import_module(name), "__file__", None) or ""
        if path.endswith(".so"):
            return Path(path).read_bytes()
    raise AssertionError("none of this runtime's extension modules is a shared object")


@pytest.mark.security
def test_an_annotations_subscript_loads_no_library_the_plugin_wrote(
    make_plugin: PluginFactory, host: PluginHost, library: bytes
) -> None:
    """On a0e3d91b the library loaded in the worker (one of gcc's making ran its
    constructor: the call answered True)."""
    folder = Path(str(make_plugin("native", source=NATIVE, files={"shape.json": SHAPE})))
    (folder / "blob.hex").write_text(library.hex())
    host.discover()
    assert host.enable("native", consent=True)
    # seccomp refuses the memfd first since memfd29 (EPERM), the hook on f0500b3c as root.
    with pytest.raises(PluginCallError, match=_REFUSED_DLOPEN):
        host.call("native", "main.run")


#: A third-party frame could compile when its code named a compiler (attrs, jinja2), but
#: jinja2's template language is Python's attribute and call syntax: a template read from
#: a data file reaches any module through a default global (``cycler``) and calls into it.
#: lib29 closed it: a library's frame compiles only by an allow-list, and jinja2 is not on
#: it (tests/_sandbox/test_library_compile.py has the other routes to a template).
TEMPLATE = """\
from pathlib import Path

import jinja2

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        return jinja2.Template((HERE / "page.txt").read_text()).render()

    return {"main": {"run": run}}
"""

PAGE = (
    "{% set b = cycler.__init__.__globals__.__builtins__ %}"
    "{% set c = b.__import__('ctypes') %}{{ c.sizeof(c.c_int) }}"
)


@pytest.mark.security
def test_a_template_of_the_plugins_data_calls_nothing_it_names(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """On a0e3d91b (and up to f0500b3c) the call answered "4": the template imported
    ctypes and called it."""
    make_plugin("page", source=TEMPLATE, files={"page.txt": PAGE})
    host.discover()
    assert host.enable("page", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"jinja2/environment.py \(Environment._compile\) compiles a template to Python",
    ):
        host.call("page", "main.run")


#: attack23's loader reuse, for native code: an extension module's loader class loads
#: any file it is handed (``_imp.create_dynamic`` dlopens it, and the library's
#: constructor runs before the missing ``PyInit_`` is noticed); a memfd is no noexec mount.
EXTENSION = """\
import math
import os
from importlib.machinery import ModuleSpec
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        fd = os.memfd_create("n")
        os.write(fd, bytes.fromhex((HERE / "blob.hex").read_text()))
        path = f"/proc/self/fd/{fd}"
        try:
            type(math.__loader__)("n", path).create_module(ModuleSpec("n", None, origin=path))
        except ImportError as exc:
            if "PyInit_n" not in str(exc):
                raise
        return os.path.exists("/tmp/native-ran")

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_an_extension_loader_loads_no_library_the_plugin_wrote(
    make_plugin: PluginFactory, host: PluginHost, library: bytes
) -> None:
    """On a0e3d91b the library loaded in the worker (one of gcc's making ran its
    constructor: the call answered True)."""
    folder = Path(str(make_plugin("extension", source=EXTENSION)))
    (folder / "blob.hex").write_text(library.hex())
    host.discover()
    assert host.enable("extension", consent=True)
    # seccomp refuses the memfd first since memfd29 (EPERM), the hook on f0500b3c as root.
    with pytest.raises(PluginCallError, match=_REFUSED_EXTENSION):
        host.call("extension", "main.run")


#: attack26's typing route, through typing_extensions (pydantic's dependency, so in every
#: runtime): its ``get_annotations(obj, eval_str=True)`` evaluates each string itself,
#: in a library's frame, which the hook let compile anything.
EVAL_STR = """\
from pathlib import Path

import typing_extensions

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        class Box:
            pass

        Box.__annotations__ = {"x": (HERE / "helpers.txt").read_text()}
        return str(typing_extensions.get_annotations(Box, eval_str=True)["x"])

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_typing_extensions_evaluates_no_annotation_of_the_plugins_data(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """On a0e3d91b the call answered "4" (``ctypes.sizeof(c_int)``, from helpers.txt)."""
    text = "[__import__('ctypes').sizeof(__import__('ctypes').c_int), int][0]"
    make_plugin("evalstr", source=EVAL_STR, files={"helpers.txt": text})
    host.discover()
    assert host.enable("evalstr", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"typing_extensions.py \(get_annotations.<locals>.<dictcomp>\) was handed "
        r"annotation text that calls or imports",
    ):
        host.call("evalstr", "main.run")


#: What must keep working: the plugin's own postponed annotations through
#: typing_extensions, extension modules and libraries of the runtime and the system.
NEAR = """\
from __future__ import annotations

import ctypes
import string

import attr
import typing_extensions

SPACE = {}
exec("TOP = 1", SPACE)


def Meta(low):
    return ("meta", low)


class Point:
    x: int
    y: typing_extensions.Annotated[int, Meta(0)]


def create_functions(config):
    def run():
        import _bz2

        hints = typing_extensions.get_annotations(Point, eval_str=True)
        libc = ctypes.CDLL("libc.so.6")
        ctypes.CDLL(_bz2.__file__)
        ctypes.CDLL(None)
        space = {}
        exec("Y = 2", space)
        named = [
            SPACE["TOP"],
            space["Y"],
            [eval(t) for t in ("1 + 2",)][0],
            string.Template("$n").substitute(n=2 + 2),
            attr.make_class("P", ["a"])(5).a,
        ]
        return [str(hints["x"]), str(hints["y"]), libc.abs(-3), _bz2.__name__, named]

    return {"main": {"run": run}}
"""


def test_the_runtimes_native_code_and_own_annotations_still_load(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: a bare soname, a runtime extension (imported and by ctypes), the program
    itself, an annotation of the plugin's source evaluated by typing_extensions, and
    the plugin's own exec and eval, named (at module level, in a function, in a
    comprehension), and attrs' compile (on the allow-list of libraries' generators; jinja2's
    is refused since lib29: tests/_sandbox/test_library_compile.py)."""
    make_plugin("near", source=NEAR)
    host.discover()
    assert host.enable("near", consent=True)
    assert host.call("near", "main.run") == [
        "<class 'int'>",
        "typing.Annotated[int, ('meta', 0)]",
        3,
        "_bz2",
        [1, 2, 3, "4", 5],
    ]


#: "The plugin's own frames may compile: ``exec(text)`` in the plugin is what the scanner
#: reads." But the exec a plugin's frame calls need not be named there: pydantic's
#: ``ImportString`` imports the callable a data file names (``builtins.exec``), and the
#: plugin calls the value it got back, here as an attribute (``ns.exec``), which the
#: scanner does not take for the builtin.
IMPORT_STRING = """\
import json
import types
from pathlib import Path

from pydantic import ImportString, TypeAdapter

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        shape = json.loads((HERE / "shape.json").read_text())
        ns = types.SimpleNamespace(exec=TypeAdapter(ImportString).validate_python(shape["call"]))
        space = {}
        ns.exec(shape["text"], space)
        return space["X"]

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_a_plugin_frame_compiles_only_through_an_exec_it_names(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """On a0e3d91b the call answered 4."""
    shape = json.dumps({"call": "builtins.exec", "text": EVIL})
    make_plugin("importstring", source=IMPORT_STRING, files={"shape.json": shape})
    host.discover()
    assert host.enable("importstring", consent=True)
    with pytest.raises(
        PluginCallError,
        match=r"/plugin/plugin.py \(create_functions.<locals>.run\) compiles through a callable "
        r"it does not name",
    ):
        host.call("importstring", "main.run")
