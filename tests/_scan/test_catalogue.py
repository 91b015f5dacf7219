"""The rule catalogue: ``caplet scan --rules`` rows and docs/rules.md, generated from RULES."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._scan._catalogue import REGENERATE, main, rules_markdown, rules_table
from caplet._scan._examples import CANONICAL, GAPS
from caplet._scan._indicators import BIDI_CONTROLS
from caplet._scan._rules import RULES, RuleFamily

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_docs_rules_md_is_generated_from_the_rule_table() -> None:
    assert DOCS.read_text(encoding="utf-8") == rules_markdown(), (
        f"docs/rules.md is stale: regenerate it with `{REGENERATE}` (from the repository root)"
    )


def test_main_prints_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    main()
    assert capsys.readouterr().out == rules_markdown()


def test_the_table_lists_every_rule_once_grouped_by_family() -> None:
    rows = rules_table()
    assert sorted(r.rule_id for r in rows) == sorted(RULES)
    families = list(RuleFamily)
    positions = [families.index(r.family) for r in rows]
    assert positions == sorted(positions)
    for row in rows:
        rule = RULES[row.rule_id]
        assert (row.family, row.kind, row.severity) == (rule.family, rule.kind, rule.severity)
        assert row.rationale == rule.rationale != ""


def test_the_page_has_a_section_and_examples_for_every_rule() -> None:
    page = rules_markdown()
    for rule_id in RULES:
        assert page.count(f"\n### {rule_id}\n") == 1
        assert f"[{rule_id}](#{rule_id.lower()})" in page
    shown_verbatim = 0
    for item in CANONICAL:
        lines = item.bad.splitlines()
        if item.is_tree or not all(len(x) <= 160 and x.isprintable() for x in lines):
            continue  # trees are listed, invisible characters escaped, long lines cut
        assert f"```python\n{item.bad}```" in page, item.rule_id
        shown_verbatim += 1
    assert shown_verbatim > 30
    for item in GAPS:
        assert f"- {item.rule_id}, " in page


def test_the_page_shows_invisible_characters_escaped() -> None:
    page = rules_markdown()
    assert not BIDI_CONTROLS.intersection(page)
    assert "\\u202e" in page  # the Trojan Source example, readable
    assert "\0" not in page
    assert max(len(line) for line in page.splitlines()) < 400


def test_markdown_specials_in_prose_are_escaped() -> None:
    page = rules_markdown()
    # a bare __globals__ would render bold, <program> as an HTML tag, | as a cell break
    assert "\\_\\_globals\\_\\_" in page
    assert "&lt;program&gt;" in page
    assert "curl\\|sh" in page
