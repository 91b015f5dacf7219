"""``caplet selftest`` end to end: the same corpus and bench, through the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._selftest._corpus import CASES, select
from caplet._selftest._report import BEGIN_MARKER, END_MARKER, table_case_names
from tests.conftest import ROOT

runner = CliRunner()

#: The families that need no kernel layer to be stopped, plus the protocol's.
FAST_FAMILIES = ("protocol", "supply-chain", "auditor")


def selftest(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, ["selftest", *args, "--json"])
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_selftest_json_runs_the_corpus_end_to_end() -> None:
    families = [option for family in FAST_FAMILIES for option in ("--family", family)]
    document = selftest(*families)
    expected = [case.name for case in select(families=FAST_FAMILIES)]
    assert [case["name"] for case in document["cases"]] == expected
    assert document["ok"] is True
    assert document["summary"] == {
        "contained": len(expected),
        "contained-elsewhere": 0,
        "open": 0,
        "error": 0,
    }
    required = {name: layer for name, layer in document["layers"].items() if name != "cgroup"}
    assert all(layer["available"] for layer in required.values())
    assert document["layers"]["cgroup"]["available"] or not ROOT
    # A missing optional cgroup leaves none of these families' cases to another layer.
    assert document["missing_layers"] in ({}, {} if ROOT else {"cgroup": []})
    first = document["cases"][0]
    assert set(first) >= {"attack", "family", "expected_layer", "status", "passed", "outcome"}


def test_a_missing_layer_is_reported_with_what_it_leaves_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without namespaces *and* Landlock nothing keeps /etc/passwd out of reach:
    # the selftest must say so and fail, not hide it. Seccomp still stops TCP.
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces,landlock")
    document = selftest("--case", "read-etc-passwd", "--case", "tcp-connect", code=1)
    assert document["ok"] is False
    by_name = {case["name"]: case for case in document["cases"]}
    assert by_name["read-etc-passwd"]["status"] == "open"
    assert by_name["read-etc-passwd"]["layer_missing"] is True
    assert by_name["tcp-connect"]["status"] == "contained"
    assert document["layers"]["namespaces"]["available"] is False
    assert document["layers"]["landlock"]["available"] is False
    assert document["missing_layers"]["namespaces"] == [
        {"name": "read-etc-passwd", "status": "open", "passed": False}
    ]
    assert document["missing_layers"]["landlock"] == []


def test_defence_in_depth_is_reported_as_degraded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    monkeypatch.setenv("COLUMNS", "300")  # one table row per line
    result = runner.invoke(app, ["selftest", "--case", "read-etc-passwd"])
    assert result.exit_code == 0, result.output
    assert "contained-elsewhere, pass (degraded)" in result.output
    assert "✗ namespaces: disabled by CAPLET_TEST_DISABLE_LAYERS" in result.output
    assert "missing namespaces leaves these to other layers: read-etc-passwd" in result.output
    assert "1 cases in" in result.output
    assert result.output.rstrip().endswith("1 contained-elsewhere; passed")


def test_list_shows_the_whole_corpus_without_running_it() -> None:
    document = selftest("--list")
    assert [case["name"] for case in document["cases"]] == [case.name for case in CASES]


def test_an_unknown_case_is_a_usage_error() -> None:
    document = selftest("--case", "fork-bom", code=2)
    assert "did you mean 'fork-bomb'" in document["error"]["message"]


def test_write_puts_the_table_between_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "security.md"
    page.write_text(f"# Security\n\n{BEGIN_MARKER}\n{END_MARKER}\n\nReport to us.\n")
    result = runner.invoke(
        app, ["selftest", "--family", "auditor", "--write", str(page)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert table_case_names(text) == [case.name for case in select(families=["auditor"])]
    assert text.startswith("# Security\n\n")
    assert text.endswith("Report to us.\n")
