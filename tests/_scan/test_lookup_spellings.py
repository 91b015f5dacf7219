"""Lookups by names spelled in ways blind17's samples used (caplet._scan._sink_lookups,
CPL-THR-003, with the evaluator's ``_values``/``_evaluate_methods``): a name packed into
integers by ``struct.pack``, spelled from Unicode character names, a literal's affix cut
off and its case flipped, a dotted name resolved by ``pydoc.locate``; each found with the
prefilter too, each with benign code of the same shape that stays clean."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind17 (tune b17-cn-struct-pack-name, -unicodedata-lookup, -swapcase-removeprefix,
#: -pydoc-locate), written again with other names and other APIs.
SPELLINGS = [
    "import os, struct\n_P = (0x706F, 0x7065, 0x6E00)\n"
    "run = getattr(os, struct.pack('>3H', *_P).decode().rstrip('\\x00'))\nrun(cmd)\n",
    "import subprocess, struct\n"
    "f = getattr(subprocess, struct.pack('<5B', 80, 111, 112, 101, 110).decode())\nf(cmd)\n",
    "import builtins, unicodedata\n"
    "def letter(c):\n    return unicodedata.lookup('LATIN SMALL LETTER ' + c)\n"
    "def word(cs):\n    return ''.join(letter(c) for c in cs)\n"
    "getattr(builtins, word('EVAL'))(payload)\n",
    "import importlib\nm = 'xxSUBPROCESS'.removeprefix('xx').swapcase()\n"
    "n = 'call_'.removesuffix('_')\ngetattr(importlib.import_module(m), n)(cmd, shell=True)\n",
    "import pydoc\nspawn = pydoc.locate('.'.join(('os', 'popen')))\nspawn(cmd)\n",
    "from pydoc import locate\n"
    "run = locate('subprocess' + '.check_output')\nrun(cmd, shell=True)\n",
]


@pytest.mark.parametrize("source", SPELLINGS)
def test_a_name_packed_spelled_or_trimmed_is_a_computed_lookup(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize("source", SPELLINGS)
def test_a_spelled_lookup_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-003")


@pytest.mark.parametrize(
    "source",
    [
        # binary headers packed and unpacked, Unicode names looked up for display
        "import struct\nheader = struct.pack('<IHH', magic, major, minor)\nsock.send(header)\n",
        "import unicodedata\nSNOWMAN = unicodedata.lookup('SNOWMAN')\nprint(SNOWMAN)\n",
        # a version's prefix cut off, a plugin's class found by a configured dotted name
        "version = tag.removeprefix('v')\nname = 'Config'.swapcase()\n",
        "import pydoc\ncls = pydoc.locate(settings['backend'])\nbackend = cls()\n",
        "import pydoc\nencoder = pydoc.locate('json.JSONEncoder')\n",
        "import os\nmode = getattr(os, 'O_' + 'binary'.swapcase(), 0)\n",
    ],
)
def test_packed_headers_display_names_and_configured_classes_stay_clean(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)
