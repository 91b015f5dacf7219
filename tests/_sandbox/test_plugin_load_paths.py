"""steer22: a worker imports code only from its snapshot and the runtime, never from what
the plugin wrote.

The gate reads a plugin's ``.py`` files; the snapshot the worker loads is exactly those.
But the worker has writable places (its private ``/tmp``, its working directory, any
``fs.write`` grant), and ``import`` reads any directory on ``sys.path``: a plugin copied its
``helpers.txt`` (``import ctypes``; a text file the scanner does not read as code) to
``/tmp/x/evil.py``, put ``/tmp/x`` on ``sys.path`` and imported it. The scanner said three
warnings (a mkdir, a copy, a third-party import), the static-only audit was MEDIUM,
approvable by the default policy, and ctypes ran in the jail. Here the host runs with the
red-team switch (the static gate off), so what is measured is the worker alone.
"""

from __future__ import annotations

import marshal

import pytest

from caplet import PluginCallError, PluginHost
from tests._sandbox.conftest import EVIL
from tests.conftest import PluginFactory

COPIES = """\
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run(where):
        Path(where).mkdir(exist_ok=True)
        shutil.copyfile(HERE / "helpers.txt", Path(where) / "evil.py")
        sys.path.insert(0, where)
        import evil

        return evil.X

    return {"main": {"run": run}}
"""

SIBLINGS = """\
import sys
from pathlib import Path

import helpers

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        sys.path.insert(0, str(HERE / "lib"))
        import inner
        import json

        return [helpers.VALUE, inner.VALUE, json.dumps(1)]

    return {"main": {"run": run}}
"""


@pytest.fixture
def host(red_team_host: PluginHost) -> PluginHost:
    """The red-team host of tests/_sandbox/conftest.py."""
    return red_team_host


@pytest.mark.security
@pytest.mark.parametrize("where", ["/tmp/x", "/tmp/work/x", "."])
def test_a_module_the_plugin_wrote_is_never_imported(
    make_plugin: PluginFactory, host: PluginHost, where: str
) -> None:
    make_plugin("copies", source=COPIES, files={"helpers.txt": EVIL})
    host.discover()
    assert host.enable("copies", consent=True)
    # On main the call answered 4: the copied module's ctypes ran.
    with pytest.raises(PluginCallError, match="No module named 'evil'"):
        host.call("copies", "main.run", where)


def test_the_plugins_own_modules_and_the_runtime_still_import(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss: a sibling module, a sub-folder of the plugin put on sys.path, and the
    standard library imported during a call."""
    make_plugin(
        "siblings",
        source=SIBLINGS,
        files={"helpers.py": "VALUE = 'sibling'\n", "lib/inner.py": "VALUE = 'inner'\n"},
    )
    host.discover()
    assert host.enable("siblings", consent=True)
    assert host.call("siblings", "main.run") == ["sibling", "inner", "1"]


SWAPS = """\
import importlib
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run(where):
        os.symlink(HERE, where)
        sys.path.insert(0, where)
        try:
            import not_here  # the hook is asked about the link: the snapshot, resolved
        except ImportError:
            pass
        os.unlink(where)
        os.mkdir(where)
        shutil.copyfile(HERE / "helpers.txt", Path(where) / "evil.py")
        importlib.invalidate_caches()
        import evil

        return evil.X

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_a_link_to_the_snapshot_swapped_for_a_folder_is_never_imported_from(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """attack23: the guard resolved the link to the snapshot when the hook was asked, but
    the finder it made lists the path as spelled at every import. On main the call answered
    4: the copied module's ctypes ran."""
    make_plugin("swaps", source=SWAPS, files={"helpers.txt": EVIL})
    host.discover()
    assert host.enable("swaps", consent=True)
    with pytest.raises(PluginCallError, match="No module named 'evil'"):
        host.call("swaps", "main.run", "/tmp/ln")


LINKS = """\
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        os.symlink(HERE / "lib", "/tmp/lib")
        sys.path.insert(0, "/tmp/lib")
        import inner

        return [inner.VALUE, inner.__file__]

    return {"main": {"run": run}}
"""


def test_a_link_to_the_plugins_own_folder_still_imports(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """Near miss (attack23): a link to a sub-folder of the snapshot imports from it, found
    where the link led when the hook was asked (on main at the link's path)."""
    make_plugin("links", source=LINKS, files={"lib/inner.py": "VALUE = 'inner'\n"})
    host.discover()
    assert host.enable("links", consent=True)
    value, file = host.call("links", "main.run")
    assert value == "inner"
    assert file.endswith("/lib/inner.py")


REUSES = """\\
import shutil
import sys
from pathlib import Path

import helpers

HERE = Path(__file__).parent


def create_functions(config):
    def run(where, how):
        if how == "own":
            return helpers.__loader__.get_data(str(HERE / "helpers.txt")).decode()
        Path(where).mkdir(exist_ok=True)
        shutil.copyfile(HERE / "helpers.txt", Path(where) / "evil.py")
        if how == "loader_class":
            return type(helpers.__loader__)("evil", where + "/evil.py").load_module().X
        if how == "finder_path":
            finder = sys.path_importer_cache[str(HERE)]
            finder.path = where
            finder.invalidate_caches()
            import evil

            return evil.X
        helpers.__spec__.loader.path = where + "/evil.py"
        helpers.__spec__.loader.exec_module(helpers)
        return helpers.X

    return {"main": {"run": run}}
"""


@pytest.mark.security
@pytest.mark.parametrize("function", ["loader_class", "loader_path", "finder_path"])
def test_a_loader_of_the_plugins_own_module_reads_no_file_the_plugin_wrote(
    make_plugin: PluginFactory, host: PluginHost, function: str
) -> None:
    """attack23: no path hook is asked when a loader is reused. The class of a sibling
    module's loader made for /tmp/x/evil.py, or that loader's path changed and the module
    run again, or the snapshot's cached finder given the path /tmp/x, ran the copied
    module's ctypes on main; the scanner named only the copy."""
    make_plugin("reuses", source=REUSES, files={"helpers.txt": EVIL, "helpers.py": "VALUE = 1\n"})
    host.discover()
    assert host.enable("reuses", consent=True)
    expected = r"/tmp/x/\S+ is neither the plugin.s snapshot nor the runtime"
    with pytest.raises(PluginCallError, match=expected):
        host.call("reuses", "main.run", "/tmp/x", function)
    # Near miss: a loader still reads the plugin's own files (pkgutil.get_data's way).
    assert host.call("reuses", "main.run", "/tmp/x", "own") == EVIL


PATCHES = """\\
import shutil
from pathlib import Path

import helpers

HERE = Path(__file__).parent


def create_functions(config):
    def run(where, how):
        Path(where).mkdir(exist_ok=True)
        shutil.copyfile(HERE / "helpers.txt", Path(where) / "evil.py")
        loader = type(helpers.__loader__)
        if how == "unwrapped":
            loader.get_data = loader.get_data.__wrapped__
        elif how == "replaced":
            loader.get_data = lambda self, path: open(path, "rb").read()
        else:  # a snapshot path for the module, the bytes of the file the plugin wrote
            evil = open(where + "/evil.py", "rb").read()
            loader.get_data = lambda self, path: evil
            return loader("evil", helpers.__file__).load_module().X
        return loader("evil", where + "/evil.py").load_module().X

    return {"main": {"run": run}}
"""


@pytest.mark.security
@pytest.mark.parametrize("how", ["unwrapped", "replaced", "forged"])
def test_a_loader_class_given_its_own_get_data_reads_no_file_the_plugin_wrote(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """attack24: attack23's guard is ``FileLoader.get_data`` replaced on the class, and a
    class attribute is the plugin's to set again: the guard's ``__wrapped__`` (the
    original, kept by ``functools.wraps``) or any function set as the loader class's
    ``get_data`` read ``/tmp/x/evil.py``, and its ctypes ran (the call answered 4); or
    one handing the copied bytes to a loader of a snapshot path."""
    make_plugin("patches", source=PATCHES, files={"helpers.txt": EVIL, "helpers.py": "V = 1\n"})
    host.discover()
    assert host.enable("patches", consent=True)
    expected = (
        r"helpers.py: the source importlib was handed is not that file's content"
        if how == "forged"
        else r"/tmp/x/\S+ is not a file of the plugin.s snapshot"
    )
    with pytest.raises(PluginCallError, match=expected):
        host.call("patches", "main.run", "/tmp/x", how)


MAKES_CODE = """\
import json
import types
from pathlib import Path

HERE = Path(__file__).parent


def template():
    return 0


def create_functions(config):
    def run(how):
        if how == "own":
            # Near miss: the runtime's own code objects (types.coroutine replaces a
            # function's code), a standard module imported now (its .pyc checked), an
            # async function (asyncio's first import).
            @types.coroutine
            def gen():
                yield

            import fractions

            async def later():
                return 2

            import asyncio

            return [type(gen).__name__, str(fractions.Fraction(1, 2)), asyncio.run(later())]
        if how == "marshal":
            import marshal

            code = marshal.loads(bytes.fromhex((HERE / "code.hex").read_text()))
            return type(template)(code, {})()
        shape = json.loads((HERE / "shape.json").read_text())
        code = template.__code__.replace(co_consts=tuple(shape["consts"]))
        return type(template)(code, {})()

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_a_code_object_the_plugin_makes_never_runs(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """attack24: bytecode from the plugin's data runs without any loader: a code object
    made with ``code.replace`` (or ``type(f.__code__)(...)``, neither an API the scanner
    names) and a function of it (``type(f)(code, {})``). Refused where it is made.
    Near miss: the runtime's own code objects, a .pyc imported now, an async call."""
    code = marshal.dumps((lambda: 42).__code__).hex()
    files = {"shape.json": '{"consts": [null, 42]}', "code.hex": code}
    make_plugin("makes", source=MAKES_CODE, files=files)
    host.discover()
    assert host.enable("makes", consent=True)
    for how in ("replace", "marshal"):
        with pytest.raises(PluginCallError, match=r"made a code object .* no scanner read"):
            host.call("makes", "main.run", how)
    assert host.call("makes", "main.run", "own") == ["function", "1/2", 2]


RUNS_TEXT = """\
import codeop
import dataclasses
import runpy
import timeit
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run(how):
        text = (HERE / "helpers.txt").read_text()
        if how == "timeit":
            return timeit.Timer("pass", setup=text).timeit(1)
        if how == "codeop":
            return type(run)(codeop.compile_command(text, "x", "exec"), {})()
        if how == "runpy":
            return runpy.run_path(str(HERE / "helpers.txt"))["X"]
        # Near miss: the runtime's own code generators, run during a call.
        point = dataclasses.make_dataclass("Point", ["x", "y"])
        return point(1, 2).x

    return {"main": {"run": run}}
"""


@pytest.mark.security
@pytest.mark.parametrize("how", ["timeit", "codeop", "runpy"])
def test_text_the_plugin_reads_never_runs_through_the_standard_librarys_runners(
    make_plugin: PluginFactory, host: PluginHost, how: str
) -> None:
    """attack24: ``timeit.Timer("pass", setup=text).timeit(1)``, ``codeop.compile_command``
    (and a function of its code) and ``runpy.run_path`` of the plugin's ``helpers.txt``
    (``import ctypes``) ran it; the scanner named none of them (one warning, the read).
    Near miss: a dataclass made during a call (the runtime compiles its methods)."""
    make_plugin("runs", source=RUNS_TEXT, files={"helpers.txt": EVIL})
    host.discover()
    assert host.enable("runs", consent=True)
    with pytest.raises(PluginCallError, match=r"compiles the text it is given and runs it"):
        host.call("runs", "main.run", how)
    assert host.call("runs", "main.run", "dataclass") == 1


SHARED = """\\
import importlib
import importlib.util
import shutil
from pathlib import Path

#: Modules a runtime builds as shared objects (which are, differs: Debian's has select
#: built in, pyenv's not).
CANDIDATES = ("select", "_json", "_struct", "array", "math", "_decimal", "_hashlib", "_ssl")


def create_functions(config):
    def run(where):
        for name in CANDIDATES:
            found = importlib.import_module(name)
            if getattr(found, "__file__", "").endswith(".so"):
                break
        Path(where).mkdir(exist_ok=True)
        copy = str(Path(where) / Path(found.__file__).name)
        shutil.copyfile(found.__file__, copy)
        loader = type(found.__loader__)(name, copy)
        spec = importlib.util.spec_from_loader(name, loader, origin=copy)
        try:
            module = loader.create_module(spec)
        except ImportError as exc:
            return str(exc)
        return "loaded " + str(module)

    return {"main": {"run": run}}
"""


@pytest.mark.security
def test_a_shared_object_the_plugin_copied_never_loads(
    make_plugin: PluginFactory, host: PluginHost
) -> None:
    """attack24, held: the class of an extension module's loader (``ExtensionFileLoader``,
    named by no import API the scanner reads) made for a shared object in ``/tmp``: no
    ``get_data`` is asked, ``dlopen`` maps it, and the jail's ``/tmp`` is ``noexec``. A
    memfd is not (attack27), so the code-origin hook now refuses first: an extension
    module's file must be the runtime's."""
    make_plugin("shared", source=SHARED)
    host.discover()
    assert host.enable("shared", consent=True)
    answer = host.call("shared", "main.run", "/tmp/x")
    assert not answer.startswith("loaded"), answer
    assert "is no file of the runtime: native code is loaded only from it" in answer, answer
