"""Scan reports as SARIF 2.1.0, in the shape GitHub code scanning accepts.

``caplet scan --sarif FILE`` (issue 4, point 6) writes this log so that CI
can upload it (``github/codeql-action/upload-sarif``). The shape follows the
OASIS SARIF 2.1.0 standard (errata 01) plus what GitHub documents in "SARIF
support for code scanning":

* one run, whose ``tool.driver.rules`` is the whole rule catalogue, derived
  generically from :data:`caplet._scan._rules.RULES` (plus a minimal entry
  for any rule id a finding carries that the table does not know);
* each rule has ``shortDescription``, ``fullDescription``, ``help`` (text and
  Markdown), a ``defaultConfiguration.level``, ``properties.tags`` with
  ``security`` and the rule family, and ``properties["security-severity"]``
  (a number as a string: GitHub ranks >= 9.0 critical, 7.0-8.9 high,
  4.0-6.9 medium, 0.1-3.9 low, and only for rules tagged ``security``);
* results carry ``ruleId`` and ``ruleIndex``, a level (danger -> error,
  warning -> warning, info -> note), a physical location with a *relative*
  URI under ``%SRCROOT%``, a region only when the line is known (GitHub
  rejects line 0), and ``partialFingerprints`` so that an alert keeps its
  identity when code moves.

**URIs and the common base.** GitHub resolves a result's URI against the
repository checkout, and CI runs ``caplet scan`` from there, so URIs are
relative to ``base`` (default: the current directory) when every scanned
root lies inside it: ``caplet scan plugins/foo`` yields
``plugins/foo/main.py``. When some root lies outside, the base is the
deepest directory common to all roots instead. Each finding's file is
prefixed with its report's root relative to that base, so several roots
share one run without clashing. A root that is a single file is reported
under its own name; the files of an archive root appear under the archive's
path (``dist/pkg-1.0.tar.gz/pkg/api.py``). The absolute base is recorded in
``run.originalUriBaseIds`` for other SARIF viewers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Literal, NotRequired, TypedDict, assert_never
from urllib.parse import quote

from caplet._atomic import atomic_write
from caplet._errors import ScanError
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanReport
from caplet._scan._rules import RULES, Rule

__all__ = [
    "FINGERPRINT_KEY",
    "INFORMATION_URI",
    "SARIF_SCHEMA_URI",
    "SARIF_VERSION",
    "SRCROOT",
    "SarifLevel",
    "SarifLog",
    "SarifResult",
    "SarifRule",
    "SarifRun",
    "to_sarif",
    "write_sarif",
]

SARIF_VERSION: Final = "2.1.0"
#: The ``id`` of the OASIS schema (errata 01) the log validates against.
SARIF_SCHEMA_URI: Final = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
#: Where people learn about the tool (the package's page on PyPI).
INFORMATION_URI: Final = "https://pypi.org/project/caplet/"
#: The uriBaseId every artifact location is relative to.
SRCROOT: Final = "%SRCROOT%"
#: The key of caplet's own partial fingerprint (versioned: a change of the
#: recipe must not make old and new alerts collide).
FINGERPRINT_KEY: Final = "caplet/v1"

SarifLevel = Literal["error", "warning", "note"]


# SARIF's own key spelling (camelCase); the two TypedDicts whose keys are no
# identifiers ("security-severity", "$schema") use the functional form.
class SarifMessage(TypedDict):
    text: str


class SarifMultiformat(TypedDict):
    text: str
    markdown: NotRequired[str]


class SarifConfiguration(TypedDict):
    level: SarifLevel


SarifRuleProperties = TypedDict(
    "SarifRuleProperties", {"tags": list[str], "security-severity": str}
)


class SarifRule(TypedDict):
    id: str
    name: str
    shortDescription: SarifMultiformat
    fullDescription: SarifMultiformat
    help: SarifMultiformat
    defaultConfiguration: SarifConfiguration
    properties: SarifRuleProperties


class SarifArtifactLocation(TypedDict):
    uri: str
    uriBaseId: str


class SarifSnippet(TypedDict):
    text: str


class SarifRegion(TypedDict):
    startLine: int
    startColumn: NotRequired[int]
    snippet: NotRequired[SarifSnippet]


class SarifPhysicalLocation(TypedDict):
    artifactLocation: SarifArtifactLocation
    region: NotRequired[SarifRegion]


class SarifLocation(TypedDict):
    physicalLocation: SarifPhysicalLocation


class SarifResultProperties(TypedDict):
    severity: str
    capability: NotRequired[str]
    covered: bool


class SarifResult(TypedDict):
    ruleId: str
    ruleIndex: int
    level: SarifLevel
    message: SarifMessage
    locations: list[SarifLocation]
    partialFingerprints: dict[str, str]
    properties: SarifResultProperties


class SarifDriver(TypedDict):
    name: str
    informationUri: str
    version: str
    semanticVersion: str
    rules: list[SarifRule]


class SarifTool(TypedDict):
    driver: SarifDriver


class SarifBaseLocation(TypedDict):
    uri: str


class SarifRunProperties(TypedDict):
    roots: list[str]
    filesScanned: int
    bytesScanned: int


class SarifRun(TypedDict):
    tool: SarifTool
    originalUriBaseIds: dict[str, SarifBaseLocation]
    results: list[SarifResult]
    properties: SarifRunProperties


SarifLog = TypedDict("SarifLog", {"$schema": str, "version": str, "runs": list[SarifRun]})


def _level(severity: Severity) -> SarifLevel:
    match severity:
        case Severity.DANGER:
            return "error"
        case Severity.WARNING:
            return "warning"
        case Severity.INFO:
            return "note"
        case _:
            assert_never(severity)


def _security_severity(severity: Severity) -> str:
    # GitHub's bands: danger refuses a load (high), warning is medium, info low.
    match severity:
        case Severity.DANGER:
            return "8.0"
        case Severity.WARNING:
            return "5.0"
        case Severity.INFO:
            return "2.0"
        case _:
            assert_never(severity)


# -- rules ----------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _template_text(template: str) -> str:
    """A message template without its value: ``{api} executes`` -> ``<api> executes``."""
    return _PLACEHOLDER.sub(r"<\1>", template)


def _clean(text: str) -> str:
    """Text SARIF (UTF-8 JSON) can carry: undecodable bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _words(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("_", "-").split("-"))


def _rule_descriptor(rule: Rule) -> SarifRule:
    family = rule.family.value
    summary = _clean(_template_text(rule.message))
    rationale = _clean(rule.rationale) if rule.rationale else summary
    uncovered = rule.severity.value
    if rule.covered_by is not None and rule.covered_severity is not None:
        capability = rule.covered_by.value
        coverage = (
            f"{uncovered} when no declared capability covers it;"
            f" {rule.covered_severity.value} behind an approved {capability} capability."
        )
        coverage_md = (
            f"**{uncovered}** when no declared capability covers it;"
            f" **{rule.covered_severity.value}** behind an approved `{capability}` capability."
        )
    else:
        coverage = f"{uncovered}; no capability covers it."
        coverage_md = f"**{uncovered}**; no capability covers it."
    hint = _clean(rule.hint)
    text = f"{rationale}\nFinding: {summary}\nFix: {hint}\nSeverity: {coverage}"
    markdown = (
        f"{rationale}\n\n**Finding:** {summary}\n\n**Fix:** {hint}\n\n**Severity:** {coverage_md}"
        f"\n\nRule family: `{family}`, kind: `{rule.kind.value}`."
    )
    number = rule.rule_id.rsplit("-", 1)[-1]
    tags = list(dict.fromkeys(["security", family, rule.kind.value]))
    return {
        "id": rule.rule_id,
        "name": f"{_words(family)}{number}" if number.isdigit() else _words(rule.rule_id),
        "shortDescription": {"text": summary},
        "fullDescription": {"text": rationale},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": _level(rule.severity)},
        "properties": {
            "tags": tags,
            "security-severity": _security_severity(rule.severity),
        },
    }


def _unknown_rule(rule_id: str, severity: Severity) -> SarifRule:
    text = f"caplet rule {rule_id} (not in this version's rule catalogue)"
    return {
        "id": rule_id,
        "name": rule_id,
        "shortDescription": {"text": text},
        "fullDescription": {"text": text},
        "help": {"text": text, "markdown": text},
        "defaultConfiguration": {"level": _level(severity)},
        "properties": {
            "tags": ["security"],
            "security-severity": _security_severity(severity),
        },
    }


def _rules(reports: Sequence[ScanReport]) -> list[SarifRule]:
    rules = [_rule_descriptor(rule) for rule in RULES.values()]
    unknown: dict[str, Severity] = {}
    for report in reports:
        for finding in report.findings:
            if finding.rule_id in RULES:
                continue
            known = unknown.get(finding.rule_id)
            if known is None or finding.severity.rank < known.rank:
                unknown[finding.rule_id] = finding.severity
    rules.extend(_unknown_rule(rule_id, unknown[rule_id]) for rule_id in sorted(unknown))
    return rules


# -- locations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Root:
    """Where one report's files sit relative to the common base (POSIX, "" = the base)."""

    prefix: str
    #: For a single-file root, the file's name; findings naming it sit in ``parent``.
    file_name: str | None
    parent: str

    def path_of(self, file: str) -> str:
        if self.file_name is not None and file == self.file_name:
            return _join(self.parent, file)
        return _join(self.prefix, file)


def _join(prefix: str, file: str) -> str:
    if not file:  # a finding about the root itself (the manifest as a whole)
        return f"{prefix}/" if prefix else ""
    return f"{prefix}/{file}" if prefix else file


def _relative(path: Path, base: Path) -> str:
    text = PurePosixPath(Path(os.path.relpath(path, base)).as_posix()).as_posix()
    return "" if text == "." else text


def _within(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def _roots(reports: Sequence[ScanReport], base: Path | None) -> tuple[Path, list[_Root]]:
    """The common base and each report's place under it (see the module docstring)."""
    # abspath, not resolve(): a symlinked root keeps its path inside the checkout.
    absolute = [Path(os.path.abspath(report.root)) for report in reports]  # noqa: PTH100
    is_file = [path.is_file() for path in absolute]
    anchors = [path.parent if file else path for path, file in zip(absolute, is_file, strict=True)]
    chosen = Path(os.path.abspath(base if base is not None else Path.cwd()))  # noqa: PTH100
    if anchors and not all(_within(anchor, chosen) for anchor in anchors):
        chosen = Path(os.path.commonpath(anchors))
    roots = [
        _Root(
            prefix=_relative(path, chosen),
            file_name=path.name if file else None,
            parent=_relative(path.parent, chosen),
        )
        for path, file in zip(absolute, is_file, strict=True)
    ]
    return chosen, roots


def _uri(path: str) -> str:
    """A relative URI reference for a POSIX path; the directory itself is ``./``."""
    if not path:
        return "./"
    # Percent-encode the file name's own bytes (surrogateescape recovers
    # undecodable ones), so the URI names exactly the file that was scanned.
    return quote(path.encode("utf-8", "surrogateescape"), safe="/")


def _fingerprint(rule_id: str, uri: str, excerpt: str) -> str:
    """A hash of what identifies a finding, without its line number.

    Whitespace is collapsed so re-indenting keeps the alert; the line is left
    out so moving code keeps it too (GitHub matches alerts across commits on
    ``partialFingerprints``).
    """
    normalised = " ".join(_clean(excerpt).split())
    digest = hashlib.sha256(f"{rule_id}\0{uri}\0{normalised}".encode()).hexdigest()
    return digest[:32]


def _location(uri: str, finding: Finding) -> SarifLocation:
    physical: SarifPhysicalLocation = {"artifactLocation": {"uri": uri, "uriBaseId": SRCROOT}}
    if finding.line >= 1:  # GitHub rejects startLine 0; unknown lines get no region
        region: SarifRegion = {"startLine": finding.line}
        if finding.column >= 1:
            region["startColumn"] = finding.column
        if finding.excerpt:
            region["snippet"] = {"text": _clean(finding.excerpt)}
        physical["region"] = region
    return {"physicalLocation": physical}


def _result(
    finding: Finding, uri: str, rule_index: int, occurrences: dict[str, int]
) -> SarifResult:
    base = _fingerprint(finding.rule_id, uri, finding.excerpt)
    # Identical lines in one file (two `eval(x)`) stay distinct alerts: number them.
    occurrence = occurrences.get(base, 0) + 1
    occurrences[base] = occurrence
    properties: SarifResultProperties = {
        "severity": finding.severity.value,
        "covered": finding.covered,
    }
    if finding.capability is not None:
        properties["capability"] = finding.capability
    message = _clean(finding.message) or finding.rule_id
    return {
        "ruleId": finding.rule_id,
        "ruleIndex": rule_index,
        "level": _level(finding.severity),
        "message": {"text": message},
        "locations": [_location(uri, finding)],
        "partialFingerprints": {FINGERPRINT_KEY: f"{base}:{occurrence}"},
        "properties": properties,
    }


# -- the log ------------------------------------------------------------------------------


def to_sarif(
    reports: Sequence[ScanReport], *, tool_version: str, base: Path | None = None
) -> SarifLog:
    """One SARIF 2.1.0 log with one run holding the findings of every report.

    ``base`` is the directory URIs are relative to when every root is inside
    it (default: the current directory); see the module docstring.
    """
    rules = _rules(reports)
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    chosen, roots = _roots(reports, base)
    results: list[SarifResult] = []
    occurrences: dict[str, int] = {}
    for report, root in zip(reports, roots, strict=True):
        for finding in report.findings:
            uri = _uri(root.path_of(finding.file))
            results.append(_result(finding, uri, index[finding.rule_id], occurrences))
    run: SarifRun = {
        "tool": {
            "driver": {
                "name": "caplet",
                "informationUri": INFORMATION_URI,
                "version": tool_version,
                "semanticVersion": tool_version,
                "rules": rules,
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": chosen.as_uri().rstrip("/") + "/"}},
        "results": results,
        "properties": {
            "roots": [_uri(root.prefix) for root in roots],
            "filesScanned": sum(report.files_scanned for report in reports),
            "bytesScanned": sum(report.bytes_scanned for report in reports),
        },
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def write_sarif(path: Path, log: SarifLog) -> None:
    """Write ``log`` to ``path`` atomically: a temporary file, fsync, then rename.

    A reader (the upload step of a CI job) sees the old file or the whole new
    one, never half of it. Raises :class:`ScanError` naming the path.
    """
    data = (json.dumps(log, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        atomic_write(path, data, mode=0o644)  # a report is meant to be read
    except OSError as exc:
        raise ScanError(
            f"cannot write SARIF to {path}: {exc.strerror or exc};"
            " create the directory or choose a writable path"
        ) from exc
