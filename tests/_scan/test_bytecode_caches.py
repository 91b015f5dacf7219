"""Another module's bytecode cache rewritten from other source (``_scan._bytecode_caches``,
blind17: tune b17-ot-pycache-poison)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str, mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


POISONED = [
    "import importlib.util, py_compile\nspec = importlib.util.find_spec('requests')\n"
    "py_compile.compile(TMP, cfile=importlib.util.cache_from_source(spec.origin),\n"
    "                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n",
    "import json, py_compile\nfrom importlib.util import cache_from_source\n"
    "target = cache_from_source(json.__file__)\npy_compile.compile('/tmp/x.py', target)\n",
]


@pytest.mark.parametrize("source", POISONED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_another_files_cache_compiled_from_other_source_is_persistence(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-009" in danger(source, mode)


@pytest.mark.parametrize("source", POISONED)
def test_a_poisoned_cache_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-009")


@pytest.mark.parametrize(
    "source",
    [
        # a file compiled into its own cache, by name or through a name bound to its path
        "import importlib.util, py_compile\n"
        "py_compile.compile(path, cfile=importlib.util.cache_from_source(path))\n",
        "import importlib.util, py_compile\nsrc = os.path.join(root, name)\n"
        "py_compile.compile(os.path.join(root, name), importlib.util.cache_from_source(src))\n",
        # an installer's own cache path, a build's output folder
        "import py_compile\npy_compile.compile(path, cfile=out + 'c', doraise=True)\n",
    ],
)
def test_a_file_compiled_into_its_own_cache_stays_clean(source: str) -> None:
    assert "CPL-THR-009" not in danger(source)
