"""attack27: routes past the code-origin hook of a0e3d91b (``_code_origin``).

Each plugin below scans clean (no finding of any level: ``caplet scan`` said ``0 danger,
0 warning, 0 info`` for each source) and, on a0e3d91b, ran text from one of its data
files in a strict worker (the host runs with the red-team switch, so only the worker is
measured).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginCallError, PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import PluginFactory

EVIL = "import ctypes\nX = ctypes.sizeof(ctypes.c_int)\n"

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


@pytest.fixture(scope="module")
def launcher() -> Iterator[SandboxLauncher]:
    sandbox = SandboxLauncher(strict=True)
    yield sandbox
    sandbox.close()


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher, red_team=True) as h:
        yield h


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
