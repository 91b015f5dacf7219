"""One file's pass leaves nothing for the cycle collector, and leaves the collector as it was.

The pass parses with the collector paused (caplet._scan._filepass._parse):
that is only right while no reference cycle is made over a syntax tree,
so a file's whole tree is freed by reference counting when its pass ends
(a pending sink check kept as a closure over its owner made every tree
cyclic garbage: a tenth of a package scan's CPU, issue 16).
"""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path
from types import CellType, FunctionType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caplet._findings import Severity
from caplet._scan._examples import CANONICAL
from caplet._scan._filepass import _has_long_line, scan_text
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._scan._rules import LONG_LINE
from caplet._scan._scanner import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_NODES,
    scan_source,
    scan_tree,
)

#: Every in-memory canary: each rule's code, sinks, chains and nested sources.
SOURCES = [e.bad for e in CANONICAL if not e.is_tree and not e.disk_only]


@pytest.fixture
def garbage() -> Iterator[list[object]]:
    """What the next gc.collect() finds unreachable (kept, not freed, while the test runs)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _scan(text: str, mode: ScanMode) -> None:
    scan_text(
        text,
        "mod.py",
        grants=NO_GRANTS,
        local_modules=(),
        max_depth=DEFAULT_MAX_DEPTH,
        max_nodes=DEFAULT_MAX_NODES,
        mode=mode,
    )


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE])
def test_no_syntax_tree_is_left_to_the_cycle_collector(
    mode: ScanMode, garbage: list[object]
) -> None:
    assert len(SOURCES) > 40
    for text in SOURCES:
        _scan(text, mode)
    gc.collect()
    # (ast.dump leaves its own recursive helper behind: a function and its cell.)
    kept = {type(o).__qualname__ for o in garbage if not isinstance(o, FunctionType | CellType)}
    kept -= {"dict", "tuple", "list"}
    assert not any(isinstance(o, ast.AST) for o in garbage)
    assert kept == set()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        _scan("import os\nos.system('id')\n", ScanMode.PLUGIN)
        _scan("def broken(:\n", ScanMode.PLUGIN)  # a SyntaxError on the way out
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


@pytest.mark.parametrize(
    "source",
    [
        'P = "/\\ud800"\n',
        'P = f"/\\udfff{1}"\n',
        'P = "\\U0000d800" + "x"\n',
    ],
)
def test_a_lone_surrogate_in_a_string_is_never_a_crash(source: str) -> None:
    # re2 encodes strictly: "/\ud800" made every plugin-mode scan (and enable)
    # raise UnicodeEncodeError.
    assert scan_source(source, "plugin.py") == []


def test_a_value_defined_through_itself_is_never_a_recursion_error() -> None:
    # From distributed/cli/dask_spec.py: the evaluator started its own depth at
    # 0 inside the resolver, and the two recursed until RecursionError.
    source = '_spec = {}\n_spec = {_spec["opts"].get("name", 0): _spec}\n'
    assert scan_source(source, "plugin.py") == []


def test_no_collection_runs_while_a_file_is_checked() -> None:
    # A large file's tree is alive through the survey and the rules, which allocate
    # enough to start collections that walk every node of it, twice or more over a
    # pass: 8% of a package scan's CPU on the benign corpus (issue 16). The pass makes
    # no cycle (above), so the collector stays paused until the tree is freed.
    body = "".join(
        f"def f{i}(a, b):\n    return [a + b * {i}, {{'k': (a, b)}}]\n" for i in range(3000)
    )
    source = "import os\n" + body + "exec(compile(s, 'x', 'exec'))\n"
    started: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    was = gc.isenabled()
    gc.enable()
    gc.collect()
    gc.callbacks.append(note)
    try:
        for mode in (ScanMode.PLUGIN, ScanMode.PACKAGE):
            _scan(source, mode)
    finally:
        gc.callbacks.remove(note)
        if not was:
            gc.disable()
    assert started == []


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x" * LONG_LINE,
        "x" * (LONG_LINE + 1),
        "a\n" + "x" * LONG_LINE + "\n",
        "a\n" + "x" * (LONG_LINE + 1),
        ("y\n" * 700) + "x" * (LONG_LINE + 1) + "\n" + ("z\n" * 700),
        ("y" * (LONG_LINE - 1) + "\n") * 5,
        ("y" * LONG_LINE + "\n") * 5 + "q" * (LONG_LINE + 1),
        "\n" * (3 * LONG_LINE) + "x" * (LONG_LINE + 1),
        ("x" * LONG_LINE + "\r\n") * 3,
    ],
)
def test_the_long_line_check_is_the_line_lengths(text: str) -> None:
    assert _has_long_line(text) is (max(map(len, text.split("\n"))) > LONG_LINE)


@given(st.lists(st.integers(min_value=0, max_value=3 * LONG_LINE), max_size=12))
def test_the_long_line_check_is_the_line_lengths_for_any_lengths(lengths: list[int]) -> None:
    text = "\n".join("x" * n for n in lengths)
    assert _has_long_line(text) is (max(map(len, text.split("\n"))) > LONG_LINE)


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"], ids=["cr", "crlf", "lf"])
def test_old_mac_newlines_do_not_hide_a_focused_payload(tmp_path: Path, newline: str) -> None:
    # Attack (scanfuzz): Python reads "\r" as a newline (the import system's universal
    # newlines, and the parser itself); the prefilter counted lines at "\n" only, put
    # every hit on line 1, and the statements around line 1 hid the lookup on line 4:
    # the file came out clean in package mode.
    source = 'import os\nx = 1\ny = 2\ngetattr(os, "sys" + "tem")("id")\n'
    (tmp_path / "mod.py").write_bytes(source.replace("\n", newline).encode())
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    [lookup] = [f for f in report.uncovered_dangers() if f.rule_id == "CPL-THR-003"]
    assert (lookup.file, lookup.line) == ("mod.py", 4)
    assert lookup.excerpt == 'getattr(os, "sys" + "tem")("id")'


@pytest.mark.parametrize("error", [RecursionError, MemoryError])
def test_a_rule_that_runs_out_of_stack_or_memory_is_too_complex_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    # the net under the evaluator's bounds: a fault injected into the rules' walk
    def fail(self: object) -> None:
        raise error

    scan_source("x = 1\n", "warm.py")  # the self-check's canaries run unpatched first
    monkeypatch.setattr("caplet._scan._visitor.RuleVisitor.run", fail)
    findings = scan_source("import ctypes\n", "plugin.py")
    [too_complex] = [f for f in findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER  # a plugin's gate fails closed
    assert f"too complex ({error.__name__} while checking)" in too_complex.message


PADDINGS = {
    # too deep to parse, too deep to survey, too many nodes to survey
    "parse": "x = a" + ".b" * 100_000 + "\n",
    "depth": "x = " + "-" * 250 + "1\n",
    "nodes": "x = [" + "1," * 500_001 + "]\n",
}
DROPPER = 'import base64\nexec(base64.b64decode("aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ2lkJyk="))\n'


@pytest.mark.parametrize("padding", PADDINGS.values(), ids=PADDINGS.keys())
def test_a_payload_made_too_complex_on_purpose_is_danger_in_a_package(
    tmp_path: Path, padding: str
) -> None:
    # Attack (scanfuzz): one statement too deep for the parser or the survey made the
    # whole file "too complex", a warning in package mode: the dropper beside it came
    # out of `caplet scan` with exit 0. With threat tokens in the file it is danger.
    (tmp_path / "mod.py").write_text(padding + DROPPER)
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert too_complex.file == "mod.py"
    assert "and it holds code the threat rules look for" in too_complex.message
    assert "review the file by hand" in too_complex.message


@pytest.mark.parametrize("name", ["setup.py", "sitecustomize.py", "conftest.py"])
def test_a_file_that_runs_by_itself_too_complex_to_check_is_danger_whatever_it_holds(
    tmp_path: Path, name: str
) -> None:
    # Attack (the tenth session): what runs without being imported (pip runs
    # setup.py, Python a sitecustomize, pytest a conftest) and is too deep to survey was
    # a warning when the prefilter saw no threat token in it: the safe answer must win
    # where nothing else reads the file first, and no benign one is that deep (the
    # benign corpus: 492 packages, none). Was WARNING on 120b52d.
    (tmp_path / name).write_text(PADDINGS["depth"] + "VALUE = 1\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert "and it runs without being imported (pip runs an install script" in too_complex.message
    assert "review the file by hand" in too_complex.message


def test_a_package_module_too_complex_without_threat_tokens_is_not_a_verdict(
    tmp_path: Path,
) -> None:
    # a generated table is no threat: a module nothing runs by itself, with no token the
    # threat rules look for, is decided by the prefilter without parsing it at all
    (tmp_path / "table.py").write_text(PADDINGS["depth"] + "VALUE = 1\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.severity is Severity.DANGER]


NEWER_SYNTAX = {
    # Python 3.12 runs these lines; an older scanner cannot parse them and mends them away
    "pep701-fstring": 'exec(base64.b64decode(f"{"aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ2lkJyk="}"))\n',
    "pep695-generic": 'def f[T](x: T) -> T: return exec(base64.b64decode("aW1wb3J0IG9z"))\n',
}


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN], ids=lambda m: m.value)
@pytest.mark.parametrize("line", NEWER_SYNTAX.values(), ids=NEWER_SYNTAX.keys())
def test_a_payload_on_a_line_the_parser_refuses_is_danger(
    tmp_path: Path, line: str, mode: ScanMode
) -> None:
    # Attack (scanfuzz): a line this interpreter cannot parse was replaced and "not
    # read", a warning in either mode, though the interpreter the code is installed
    # for may run it. With threat tokens on the lines not read it is danger.
    source = "import base64\n" + line + "f(1)\n"
    (tmp_path / "mod.py").write_text(source)
    report = scan_tree(tmp_path, mode=mode)
    try:
        ast.parse(source)
    except SyntaxError:
        pass
    else:  # an interpreter that parses the newer syntax reads the dropper itself
        assert ("CPL-THR-001", 2) in {(f.rule_id, f.line) for f in report.uncovered_dangers()}
        return
    if '{"' in line:  # a PEP 701 f-string is mended into quotes 3.11 parses: read
        assert ("CPL-THR-001", 2) in {(f.rule_id, f.line) for f in report.uncovered_dangers()}
        return
    [unparsed] = [f for f in report.findings if f.rule_id == "CPL-SCAN-003"]
    assert unparsed.severity is Severity.DANGER
    assert (unparsed.file, unparsed.line) == ("mod.py", 2)
    assert "lines 2 not read" in unparsed.message
    assert "review the file by hand" in unparsed.message


def test_a_syntax_error_on_a_line_without_threat_tokens_stays_a_warning(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(
        'import base64\nprint "hello"\nexec(base64.b64decode("eA=="))\n'
    )
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    [unparsed] = [f for f in report.findings if f.rule_id == "CPL-SCAN-003"]
    assert unparsed.severity is Severity.WARNING
    assert "threat rules" not in unparsed.message


def test_a_payload_after_too_many_hit_lines_in_an_oversized_file_is_reported(
    tmp_path: Path,
) -> None:
    # Attack (scanfuzz): a package file over the size limit is visited around its hit
    # lines, the first 512 when there are more; 1,000 harmless eval("1") lines put the
    # dropper at the end out of reach, and the file had no finding at all.
    padding = "x = 1  # " + "p" * 60 + "\n"
    source = "import base64\n" + 'y = eval("1")\n' * 1000 + padding * 40_000 + DROPPER
    (tmp_path / "mod.py").write_text(source)
    assert len(source) > DEFAULT_MAX_FILE_BYTES
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    [unchecked] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    # told, not clean; a warning: generated API clients have thousands of such lines
    assert unchecked.severity is Severity.WARNING
    assert (unchecked.file, unchecked.line) == ("mod.py", 513)
    assert "more than 512 lines holding threat tokens; only lines 1-512 were checked" in (
        unchecked.message
    )


#: A run of combining marks of two classes alternating in falling order (attack23): NFKC
#: and CPython's tokenizer sort each run in quadratic time. 2,000 marks keep the test
#: fast on code that would still parse them; real attacks used 120,000.
MARK_RUN = "\u0301\u0316" * 1_000


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
@pytest.mark.parametrize(
    "line", ["a" + MARK_RUN + " = exec\n", "# a" + MARK_RUN + "\n", "x = 'a" + MARK_RUN + "'\n"]
)
def test_a_source_with_a_long_run_of_marks_is_too_complex_not_parsed(
    tmp_path: Path, mode: ScanMode, line: str
) -> None:
    # Attack (attack23): a 240 KB plugin whose identifier, comment or string held such a
    # run took 15 s to scan; a 2 MiB one about 70 times that. Now the file is not parsed
    # (no real source holds a run past 30 marks: 9 in the 92,608 files of the benign
    # corpus and the standard library) and is judged too complex, danger. Was parsed,
    # with no CPL-SCAN-002, on 792f9b0.
    (tmp_path / "plugin.py").write_text("import os\n" + line + DROPPER)
    report = scan_tree(tmp_path, mode=mode)
    [too_complex] = [f for f in report.findings if f.rule_id == "CPL-SCAN-002"]
    assert too_complex.severity is Severity.DANGER
    assert (too_complex.file, too_complex.line) == ("plugin.py", 2)
    assert "line 2 holds a run of 2000 combining marks (no real source holds more than 30)" in (
        too_complex.message
    )
    assert "remove the run" in too_complex.message


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
def test_a_run_of_marks_within_the_bound_is_parsed_and_checked(
    tmp_path: Path, mode: ScanMode
) -> None:
    # the near miss: 30 marks (more than any real source) are parsed as ever, and the
    # payload beside them is found by the rules, not by the bound
    (tmp_path / "plugin.py").write_text("a" + MARK_RUN[:30] + " = 1\n" + DROPPER)
    report = scan_tree(tmp_path, mode=mode)
    assert "CPL-SCAN-002" not in {f.rule_id for f in report.findings}
    assert ("CPL-THR-001", Severity.DANGER) in {(f.rule_id, f.severity) for f in report.findings}


def test_a_package_module_with_a_long_run_and_no_threat_token_is_no_verdict(
    tmp_path: Path,
) -> None:
    # a package's module the prefilter decides without parsing is never parsed, so a run
    # of marks in its text (folded by the prefilter, stream-safe) is no reason for danger
    (tmp_path / "glyphs.py").write_text("# a" + MARK_RUN + "\nVALUE = 1\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.severity is Severity.DANGER]
    assert report.files_parsed == 0
