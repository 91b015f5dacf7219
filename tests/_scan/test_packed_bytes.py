"""Bytes of a literal list of integers are decoded data (caplet._scan._packed_bytes).

The attack is tune sample b15-ds-array-tobytes-exec (``exec(array("B", [...]).tobytes())``)
and its kin: a program kept as its code points in ``bytes([...])``, ``bytearray``,
``array``, ``memoryview``, a ``map`` or a comprehension over the list, run by exec,
compile, ``os.system`` or a shell: clean on main (recall16). The near misses: binary
bytes handed to a process, text of integers printed or given as an argument, a regular
expression compiled from them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package

#: "import os" as code points (the sample's program, shortened).
_INTS = "[105, 109, 112, 111, 114, 116, 32, 111, 115]"

PACKED = [
    f"from array import array\n_A = array('B', {_INTS})\nexec(_A.tobytes())\n",
    f"import array\nexec(array.array('b', {_INTS}).tobytes())\n",
    f"exec(bytes({_INTS}))\n",
    f"exec(compile(bytearray({_INTS}), '<m>', 'exec'))\n",
    f"exec(memoryview(bytes({_INTS})).tobytes())\n",
    f"D = {_INTS}\nexec(bytes(map(lambda c: c ^ 7, D)))\n",
    f"D = {_INTS}\nexec(bytes(c - 1 for c in D))\n",
    "import os\nD = (\n    105,  # i\n    100,  # d\n    32,\n    47,\n)\n"
    "os.system(bytes(D).decode())\n",
    f"import subprocess\nsubprocess.run(bytearray({_INTS}).decode(), shell=True)\n",
    "import os\nP = 0x69, 0x64, 0x20, 0x2F\nos.popen(bytes(P).decode())\n",
]


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("source", PACKED)
def test_bytes_of_listed_integers_run_as_code_or_a_command_are_decoded_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    # the whole-file pass finds it, and the prefiltered scan finds every danger it does
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-001")


def test_the_sample_is_reported_as_decoded_data() -> None:
    found = scan_source(PACKED[0], "mod.py", mode=ScanMode.PACKAGE)
    assert [f.message for f in found if f.rule_id == "CPL-THR-001"] == [
        "exec(...) of bytes of listed integers runs code that is decoded, decompressed or "
        "decrypted at run time (dropper); ship the code as readable source instead of an "
        "encoded payload"
    ]


@pytest.mark.parametrize(
    "source",
    [
        # a terminal driver's control bytes on a program's standard input: binary, not text
        "import subprocess\nsubprocess.run(['stty', 'raw'], input=bytes([3, 4, 26, 28]))\n",
        # a magic number checked beside a compiled template that is run
        "import sys\nMAGIC = bytes([0x89, 0x50, 0x4E, 0x47])\n"
        "ok = open(sys.argv[1], 'rb').read(4) == MAGIC\nexec(compile('x = 1', 'm', 'exec'))\n",
        # text of integers printed, never run
        f"import sys, os\nsys.stdout.write(bytes({_INTS}).decode())\nos.system('ls')\n",
        # text of integers handed to a process as an argument, not as the command
        f"import subprocess\nsubprocess.run(['tool', bytes({_INTS}).decode()])\n",
        # a regular expression compiled from them (re.compile is no code sink)
        "import re\nPATTERN = re.compile(bytes([40, 63, 105, 41, 97]))\n",
        # three integers: a version, not a hidden text
        "import os\nos.system(bytes([108, 115, 10]).decode())\n",
    ],
)
def test_listed_integers_that_are_data_or_never_run_are_not_threats(source: str) -> None:
    assert "CPL-THR-001" not in danger(source)
