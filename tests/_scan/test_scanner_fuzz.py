"""No input makes the scanner raise: arbitrary text and mangled real code."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caplet._findings import Finding
from caplet._scan._scanner import scan_source

FUZZ = settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SAMPLE = """import os, subprocess as sp
from os import environ
x = os.environ["TOKEN"] + getattr(os, "sys" + "tem")("ls")
sp.run(["git", *args]); open("/etc/passwd", mode)
y = "".join(chr(c) for c in [1, 2]); __import__("socket")
"""


def _check(findings: list[Finding]) -> None:
    assert findings == sorted(findings, key=Finding.sort_key)
    for f in findings:
        assert f.line >= 0
        assert f.column >= 0
        assert len(f.excerpt) <= 120


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    _check(scan_source(text, "fuzz.py"))


@FUZZ
@given(st.integers(0, len(SAMPLE)), st.integers(0, 40), st.text(max_size=20))
def test_mangled_code_never_raises(start: int, length: int, insert: str) -> None:
    _check(scan_source(SAMPLE[:start] + insert + SAMPLE[start + length :], "fuzz.py"))
