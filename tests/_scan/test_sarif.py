"""SARIF output validates against the official 2.1.0 schema and GitHub's extra rules.

The schema is OASIS's own file (tests/_scan/data/README.md says where from).
Rule ids are never spelled here: the rule table is growing, so tests take
rules from :data:`RULES` itself and use a made-up id for an unknown rule.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from jsonschema import Draft4Validator, Draft7Validator

from caplet._errors import ScanError
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanReport
from caplet._scan._rules import RULES
from caplet._scan._sarif import (
    FINGERPRINT_KEY,
    INFORMATION_URI,
    SARIF_SCHEMA_URI,
    SRCROOT,
    SarifLog,
    to_sarif,
    write_sarif,
)

SCHEMA: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)
RULE = next(iter(RULES.values()))
COVERABLE = next(r for r in RULES.values() if r.covered_by is not None)
UNKNOWN = "CPL-TEST-999"
# RFC 3986 relative-ref characters: unreserved, sub-delims, ":", "@", "/", and %XX.
URI_REFERENCE = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})+")


def _finding(
    rule_id: str = RULE.rule_id,
    severity: Severity = Severity.DANGER,
    *,
    file: str = "pkg/mod.py",
    line: int = 3,
    column: int = 5,
    excerpt: str = "eval(payload)",
    capability: str | None = None,
    covered: bool = False,
) -> Finding:
    return Finding(
        rule_id, severity, f"{rule_id} fired", file, line, column, excerpt, capability, covered
    )


def _report(root: Path, *findings: Finding) -> ScanReport:
    root.mkdir(parents=True, exist_ok=True)
    return ScanReport(root=root.as_posix(), findings=findings, files_scanned=2, bytes_scanned=40)


def _log(tmp_path: Path, *reports: ScanReport) -> SarifLog:
    return to_sarif(reports, tool_version="1.2.3", base=tmp_path)


def _results(log: SarifLog) -> list[dict[str, Any]]:
    return [dict(r) for r in log["runs"][0]["results"]]


def _uris(log: SarifLog) -> list[str]:
    return [
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    ]


def _mixed_log(tmp_path: Path) -> SarifLog:
    return _log(
        tmp_path,
        _report(
            tmp_path / "plugin",
            _finding(),
            _finding(severity=Severity.WARNING, line=0, column=0, excerpt=""),
            _finding(COVERABLE.rule_id, Severity.INFO, capability="proc.exec:git", covered=True),
            _finding(UNKNOWN, Severity.WARNING, file="", line=0, column=0, excerpt=""),
        ),
        _report(tmp_path / "other" / "pkg", _finding(file="dir with space/caf\u00e9.py")),
    )


# -- the official schema ------------------------------------------------------------------


def test_vendored_schema_is_the_official_sarif_2_1_0_schema() -> None:
    Draft4Validator.check_schema(SCHEMA)
    assert SCHEMA["id"] == SARIF_SCHEMA_URI
    assert SCHEMA["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"


@pytest.mark.parametrize("validator", [Draft4Validator, Draft7Validator])
def test_log_validates_against_the_schema(tmp_path: Path, validator: type[Draft4Validator]) -> None:
    log = json.loads(json.dumps(_mixed_log(tmp_path)))
    errors = [e.message for e in validator(SCHEMA).iter_errors(log)]
    assert errors == []


def test_schema_check_can_fail(tmp_path: Path) -> None:
    log: Any = json.loads(json.dumps(_mixed_log(tmp_path)))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    log["runs"][0]["results"][1]["level"] = "danger"
    messages = sorted(e.message for e in Draft4Validator(SCHEMA).iter_errors(log))
    assert messages == [
        "'danger' is not one of ['none', 'note', 'warning', 'error']",
        "0 is less than the minimum of 1",
    ]


# -- GitHub's extra constraints -----------------------------------------------------------


def test_github_constraints_hold(tmp_path: Path) -> None:
    log = _mixed_log(tmp_path)
    assert log["$schema"] == SARIF_SCHEMA_URI
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["informationUri"], driver["semanticVersion"]) == (
        "caplet",
        INFORMATION_URI,
        "1.2.3",
    )
    rules = driver["rules"]
    assert len({rule["id"] for rule in rules}) == len(rules)
    for rule in rules:
        assert rule["shortDescription"]["text"]
        assert rule["fullDescription"]["text"]
        assert rule["help"]["text"]
        assert rule["help"]["markdown"]
        assert "security" in rule["properties"]["tags"]
        assert 0.0 < float(rule["properties"]["security-severity"]) <= 10.0
    assert len(run["results"]) == 5
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        [location] = result["locations"]
        physical = location["physicalLocation"]
        artifact = physical["artifactLocation"]
        assert artifact["uriBaseId"] == SRCROOT
        parts = urlsplit(artifact["uri"])
        assert (parts.scheme, parts.netloc) == ("", "")
        assert not artifact["uri"].startswith("/")
        assert ".." not in artifact["uri"].split("/")
        assert URI_REFERENCE.fullmatch(artifact["uri"]), artifact["uri"]
        if "region" in physical:
            assert physical["region"]["startLine"] >= 1
        assert set(result["partialFingerprints"]) == {FINGERPRINT_KEY}
    base = run["originalUriBaseIds"][SRCROOT]["uri"]
    assert base == tmp_path.as_uri() + "/"


def test_every_rule_of_the_table_is_described_in_order(tmp_path: Path) -> None:
    rules = _mixed_log(tmp_path)["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [*RULES, UNKNOWN]
    described = rules[list(RULES).index(COVERABLE.rule_id)]
    assert COVERABLE.family.value in described["properties"]["tags"]
    assert (
        described["defaultConfiguration"]["level"]
        == {
            Severity.DANGER: "error",
            Severity.WARNING: "warning",
            Severity.INFO: "note",
        }[COVERABLE.severity]
    )
    assert COVERABLE.hint in described["help"]["text"]
    assert "{" not in described["shortDescription"]["text"]
    capability = COVERABLE.covered_by
    assert capability is not None
    assert f"`{capability.value}`" in described["help"]["markdown"]


def test_unknown_rule_gets_a_minimal_entry_at_its_worst_severity(tmp_path: Path) -> None:
    log = _log(
        tmp_path,
        _report(
            tmp_path / "p",
            _finding(UNKNOWN, Severity.INFO),
            _finding(UNKNOWN, Severity.DANGER, line=9),
        ),
    )
    rule = log["runs"][0]["tool"]["driver"]["rules"][-1]
    assert rule["id"] == UNKNOWN
    assert rule["defaultConfiguration"] == {"level": "error"}
    assert rule["shortDescription"]["text"] == (
        f"caplet rule {UNKNOWN} (not in this version's rule catalogue)"
    )
    assert [r["ruleIndex"] for r in _results(log)] == [len(RULES), len(RULES)]


# -- results ------------------------------------------------------------------------------


def test_levels_and_properties(tmp_path: Path) -> None:
    results = _results(_mixed_log(tmp_path))
    assert [r["level"] for r in results] == ["error", "warning", "note", "warning", "error"]
    assert results[2]["properties"] == {
        "severity": "info",
        "covered": True,
        "capability": "proc.exec:git",
    }
    assert results[0]["properties"] == {"severity": "danger", "covered": False}


def test_region_only_when_known(tmp_path: Path) -> None:
    results = _results(_mixed_log(tmp_path))
    assert results[0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3,
        "startColumn": 5,
        "snippet": {"text": "eval(payload)"},
    }
    assert "region" not in results[1]["locations"][0]["physicalLocation"]
    log = _log(tmp_path, _report(tmp_path / "p", _finding(column=0, excerpt="")))
    region = _results(log)[0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3}


def test_uris_are_prefixed_by_each_root_under_the_base(tmp_path: Path) -> None:
    assert _uris(_mixed_log(tmp_path)) == [
        "plugin/pkg/mod.py",
        "plugin/pkg/mod.py",
        "plugin/pkg/mod.py",
        "plugin/",
        "other/pkg/dir%20with%20space/caf%C3%A9.py",
    ]
    assert _mixed_log(tmp_path)["runs"][0]["properties"] == {
        "roots": ["plugin", "other/pkg"],
        "filesScanned": 4,
        "bytesScanned": 80,
    }


def test_roots_outside_the_base_use_their_common_directory(tmp_path: Path) -> None:
    log = to_sarif(
        [_report(tmp_path / "a" / "x", _finding()), _report(tmp_path / "b", _finding())],
        tool_version="1",
        base=tmp_path / "a",
    )
    assert _uris(log) == ["a/x/pkg/mod.py", "b/pkg/mod.py"]
    assert log["runs"][0]["originalUriBaseIds"][SRCROOT]["uri"] == tmp_path.as_uri() + "/"


def test_base_itself_as_root(tmp_path: Path) -> None:
    log = _log(tmp_path, _report(tmp_path, _finding(), _finding(file="", line=0)))
    assert _uris(log) == ["pkg/mod.py", "./"]


def test_single_file_root_is_reported_under_its_own_name(tmp_path: Path) -> None:
    source = tmp_path / "tools" / "hook.py"
    source.parent.mkdir()
    source.write_text("eval(x)\n")
    report = ScanReport(source.as_posix(), (_finding(file="hook.py"),), 1, 8)
    assert _uris(_log(tmp_path, report)) == ["tools/hook.py"]


def test_archive_root_puts_members_under_the_archive_path(tmp_path: Path) -> None:
    archive = tmp_path / "dist" / "pkg-1.0.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"\x1f\x8b")
    report = ScanReport(archive.as_posix(), (_finding(file="pkg/api.py"),), 1, 8)
    assert _uris(_log(tmp_path, report)) == ["dist/pkg-1.0.tar.gz/pkg/api.py"]


def test_relative_roots_are_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plugins" / "foo").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    report = ScanReport("plugins/foo", (_finding(),), 1, 1)
    assert _uris(to_sarif([report], tool_version="1")) == ["plugins/foo/pkg/mod.py"]


# -- fingerprints -------------------------------------------------------------------------


def _prints(log: SarifLog) -> list[str]:
    return [r["partialFingerprints"][FINGERPRINT_KEY] for r in log["runs"][0]["results"]]


def test_fingerprint_survives_moved_lines_and_reindentation(tmp_path: Path) -> None:
    before = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(line=3, column=5))))
    moved = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(line=40, column=9))))
    assert moved == before
    spaced = _prints(
        _log(tmp_path, _report(tmp_path / "p", _finding(excerpt="eval(payload)   # x")))
    )
    assert spaced != before
    reindented = _prints(
        _log(tmp_path, _report(tmp_path / "p", _finding(excerpt="    eval(payload)")))
    )
    assert reindented == before
    assert re.fullmatch(r"[0-9a-f]{32}:1", before[0])


def test_fingerprint_depends_on_rule_file_and_excerpt(tmp_path: Path) -> None:
    base = _prints(_log(tmp_path, _report(tmp_path / "p", _finding())))
    other_rule = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(UNKNOWN))))
    other_file = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(file="pkg/b.py"))))
    other_code = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(excerpt="exec(x)"))))
    assert len({base[0], other_rule[0], other_file[0], other_code[0]}) == 4


def test_identical_lines_in_one_file_are_numbered(tmp_path: Path) -> None:
    prints = _prints(_log(tmp_path, _report(tmp_path / "p", _finding(line=3), _finding(line=8))))
    first, second = (p.split(":") for p in prints)
    assert first[0] == second[0]
    assert (first[1], second[1]) == ("1", "2")


# -- text that is no valid Unicode ----------------------------------------------------------


def test_undecodable_text_is_replaced_and_names_are_percent_encoded(tmp_path: Path) -> None:
    name = b"pkg/\xff.py".decode("utf-8", "surrogateescape")
    finding = _finding(file=name, excerpt=b"x = '\xff'".decode("utf-8", "surrogateescape"))
    log = _log(tmp_path, _report(tmp_path / "p", finding))
    [result] = _results(log)
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "p/pkg/%FF.py"
    assert location["region"]["snippet"]["text"] == "x = '\ufffd'"
    write_sarif(tmp_path / "out.sarif", log)
    assert json.loads((tmp_path / "out.sarif").read_text(encoding="utf-8")) == log


# -- writing --------------------------------------------------------------------------------


def test_write_sarif_writes_the_log_atomically_and_readable(tmp_path: Path) -> None:
    target = tmp_path / "scan.sarif"
    target.write_text("old")
    log = _mixed_log(tmp_path)
    write_sarif(target, log)
    assert json.loads(target.read_text(encoding="utf-8")) == log
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "plugin", "scan.sarif"]


def test_write_sarif_into_a_missing_directory_is_a_scan_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "scan.sarif"
    with pytest.raises(
        ScanError,
        match=r"cannot write SARIF to .*missing/scan\.sarif: No such file or directory;"
        " create the directory",
    ):
        write_sarif(target, _log(tmp_path))


def test_failed_rename_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "scan.sarif"
    target.mkdir()  # a directory where the file should go: the rename fails
    (target / "keep").write_text("x")
    with pytest.raises(ScanError, match=r"cannot write SARIF to .*scan\.sarif: .*writable path"):
        write_sarif(target, _log(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.sarif"]


def test_empty_scan_is_one_run_without_results(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert [run["results"] for run in log["runs"]] == [[]]
    assert list(Draft4Validator(SCHEMA).iter_errors(json.loads(json.dumps(log)))) == []
