"""One worked example per scanner rule: a true positive, a near miss, an alias.

Every rule of :data:`caplet._scan._rules.RULES` has a :class:`RuleExample`
here, and the examples are used three ways:

* the tests (``tests/_scan/test_examples.py``) check that ``bad`` fires the
  rule with the severity its mode gives, that ``good`` (a near miss: a
  ``re.compile``, an ``.exec`` method of another object, a comment that
  mentions ``eval``) does not, and that ``alias`` (an aliased or obfuscated
  spelling: ``import subprocess as sp``, ``getattr(os, "sys" + "tem")``,
  fullwidth identifiers) fires too;
* the scanner's self-check (:mod:`caplet._scan._selfcheck`) scans every
  ``bad`` once per process and refuses to scan when one does not fire (a
  regex engine that returns "no match" on an internal error must not pass
  as clean, issue 4);
* ``docs/rules.md`` shows ``bad`` and ``good`` for each rule
  (:mod:`caplet._scan._catalogue`).

Most examples are one Python file (``bad``/``good``/``alias`` are its
source, scanned as ``filename``). Rules about *files* (``setup.py``, ``.pth``,
native libraries, archives, unreadable or too large files) take small file
trees instead: ``files``/``good_files``/``alias_files`` hold them and the
three strings then only describe them. Archives are built in memory here,
bombs included: a Z_FULL_FLUSH deflate block of zeros repeated, so a
member of megabytes costs a few kilobytes and no compression time.

:data:`CANONICAL` holds one example per rule, in the order of ``RULES``.
:data:`GAPS` holds spellings the scanner gets wrong today: each is a
canonical example with another alias (or near miss), ``known_gap`` saying
why and ``gap_in`` which spelling is wrong; its test is a strict xfail, so
the day the scanner learns it the test says so.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from caplet._scan._example_builders import code as _code
from caplet._scan._example_model import FileTree, Link, RuleExample, Variant
from caplet._scan._examples_capability import CAPABILITY_EXAMPLES
from caplet._scan._examples_scan import SCAN_EXAMPLES
from caplet._scan._examples_threat import THREAT_EXAMPLES
from caplet._scan._examples_threat_flow import THREAT_FLOW_EXAMPLES

__all__ = [
    "CANONICAL",
    "EXAMPLES",
    "GAPS",
    "FileTree",
    "Link",
    "RuleExample",
    "Variant",
    "example",
]

#: The canonical example of each rule, in the order of RULES: docs/rules.md and the
#: self-check use these.
CANONICAL: Final[tuple[RuleExample, ...]] = (
    *CAPABILITY_EXAMPLES,
    *THREAT_EXAMPLES,
    *THREAT_FLOW_EXAMPLES,
    *SCAN_EXAMPLES,
)


def _gap(rule_id: str, variant: Variant, spelling: str, why: str) -> RuleExample:
    """The canonical example of ``rule_id`` with ``spelling`` as its alias or near miss."""
    base = next(e for e in CANONICAL if e.rule_id == rule_id)
    if variant is Variant.ALIAS:
        return dataclasses.replace(base, alias=spelling, known_gap=why, gap_in=variant)
    return dataclasses.replace(base, good=spelling, known_gap=why, gap_in=variant)


#: Spellings the scanner gets wrong today, each a strict xfail in the tests:
#: the day the scanner learns one, its test fails and the entry moves into
#: :data:`CANONICAL` (or is deleted).
GAPS: Final[tuple[RuleExample, ...]] = (
    _gap(
        "CPL-PROC-001",
        Variant.ALIAS,
        _code(
            """
            import os

            run = lambda shell=os: shell.system("id")
            """
        ),
        "a module bound to a lambda or function parameter default is not resolved",
    ),
    _gap(
        "CPL-DYN-004",
        Variant.ALIAS,
        "function = type(lambda: 0)(code, {})\n",
        "type() of a function or code object is not recognised as types.FunctionType",
    ),
    _gap(
        "CPL-INTRO-001",
        Variant.ALIAS,
        'leak = "{0.__init__.__globals__}".format(handler)\n',
        "attribute paths inside str.format fields are not checked (issue 4 lists this spelling)",
    ),
    _gap(
        "CPL-FS-004",
        Variant.ALIAS,
        _code(
            """
            from pathlib import Path

            key = Path.home() / ".ssh" / "id_rsa"
            """
        ),
        "path pieces joined with /, os.path.join or + are not put together for this rule",
    ),
    _gap(
        "CPL-NET-003",
        Variant.GOOD,
        '"""https://example.org/docs explains the protocol."""\n',
        "a docstring that starts with a URL is reported as a host the code talks to",
    ),
)

#: Every example: the canonical ones first, in the order of RULES, then the gaps.
EXAMPLES: Final[tuple[RuleExample, ...]] = CANONICAL + GAPS


def example(rule_id: str) -> RuleExample:
    """The canonical example of ``rule_id``; ``KeyError`` names the id."""
    for item in CANONICAL:
        if item.rule_id == rule_id:
            return item
    raise KeyError(rule_id)
