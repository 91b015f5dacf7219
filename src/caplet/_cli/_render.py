"""caplet's records as rich tables and lines for the CLI (the ``--json`` documents
are :mod:`caplet._cli._documents`).

Rich output quotes plugin and model text everywhere (names, descriptions,
capabilities, finding messages and excerpts, audit reasons, errors): every
such string goes in as :func:`caplet._cli._safe.plain`, escaped and never
markup, so a plugin cannot drive the reviewer's terminal or restyle the
review (docs/security.md, "Terminal injection during review").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, assert_never

from rich.text import Text

from caplet._capabilities._model import (
    GLOB_REACH,
    Capability,
    CapabilityKind,
    FsCapability,
    glob_folder,
    glob_reach,
    glob_words,
)
from caplet._cli._documents import jsonable
from caplet._cli._safe import ENTRY_MARGIN, plain, print_block, print_entries, print_wrapped
from caplet._cli._table import Cell, print_line, print_table
from caplet._display import listed, safe_line
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode

if TYPE_CHECKING:
    from rich.console import Console

    from caplet._audit._model import AuditResult
    from caplet._audit._report import Tone
    from caplet._host._consent import ConsentRequest
    from caplet._host._defaults import Reach
    from caplet._host._hook_model import HookCallStatus, HookResults, HookState, HookStatus
    from caplet._host._records import BrokenPlugin, PluginInfo
    from caplet._scan._model import ScanReport
    from caplet._scan._rules import Rule

# The audit, host and manifest modules are imported by the functions that show their
# records, not with this module: `caplet scan PATH` shows findings only, and the host's
# modules (pydantic models) would cost most of its start-up budget (issue 16).

__all__ = [
    "print_audit",
    "print_findings",
    "print_hook_results",
    "print_hook_statuses",
    "print_plugins",
    "print_rules",
    "print_scan_report",
    "trust_text",
]


_SEVERITY_STYLE = {Severity.DANGER: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_RISK_STYLE = {"LOW": "green", "MEDIUM": "yellow", "HIGH": "red", "CRITICAL": "bold red"}


def _tone_style(tone: Tone) -> str:
    from caplet._audit._report import Tone

    match tone:
        case Tone.PLAIN:
            return ""
        case Tone.TITLE:
            return "bold"
        case Tone.GOOD:
            return "green"
        case Tone.NOTICE:
            return "yellow"
        case Tone.BAD:
            return "red"
        case Tone.ALARM:
            return "bold red reverse"
        case _:  # pragma: no cover - exhaustive
            assert_never(tone)


def print_audit(console: Console, audit: AuditResult, *, verbose: bool = False) -> None:
    """The audit report (caplet._audit._report), coloured by tone.

    Lines are :class:`Text`, never markup: they quote plugin and model text
    (which :func:`audit_report` has escaped already; the lines keep the
    newlines it indented).
    """
    from caplet._audit._report import audit_report

    for line in audit_report(audit, verbose=verbose):
        # The report indents its own continuation lines under their values, and a line
        # wider than the console (a capability, a summary, a file name: the plugin's and
        # its model's) is wrapped here, each wrapped line ENTRY_MARGIN in: written whole,
        # the terminal wrapped it at column 0, where the report's labels start (steer37).
        print_block(
            console,
            plain(line.text, _tone_style(line.tone), multiline=True, margin=0),
            margin=ENTRY_MARGIN,
        )


#: More capabilities than this and the grant ends with a count by kind (steer22).
_COUNTED_FROM = 8
#: A kind with at most this many capabilities is named in full in the count.
_NAMED_UP_TO = 3


def grant_summary(capabilities: Sequence[Capability]) -> str:
    """The last line of a grant with many capabilities: a count by kind, the rarest kinds
    named in full, or ``""`` for a few (shown whole on the line before anyway).

    The grant is one line of every capability: three hundred paths wrap to about a hundred
    lines, and the one that reads a secret, written first, scrolled away above the
    question (steer22). The rare ones are what a reader must not miss.
    """
    if len(capabilities) <= _COUNTED_FROM:
        return ""
    kinds: dict[str, list[Capability]] = {}
    for capability in capabilities:
        kinds.setdefault(capability.kind.value, []).append(capability)
    parts = []
    for kind, members in sorted(kinds.items(), key=lambda item: (len(item[1]), item[0])):
        if len(members) <= _NAMED_UP_TO:
            parts.append(", ".join(safe_line(c.declared) for c in members))
        else:
            parts.append(f"{len(members)} {kind} ({_widest(members, kind)} ...)")
    return f"in all: {len(capabilities)} capabilities: {'; '.join(parts)}"


def _widest(members: Sequence[Capability], kind: str) -> str:
    """The member a counted kind is named by: the one that starts furthest up the
    file tree (a glob by its folder, with what it reaches there), else the first.

    Named by the first, sixty harmless folders hid ``fs.read:/home/*/.ssh/*`` (all of
    ``/home``) in the middle of the list: the count said "60 fs.read (/srv/notes/a
    ...)" (steer32). A templated path's reach is its configured value, said on its own
    line; it is named only when no literal one is counted.
    """
    literal = [c for c in members if isinstance(c, FsCapability) and not c.templated]
    if not literal:
        return safe_line(members[0].declared.removeprefix(f"{kind}:"))
    widest = min(literal, key=lambda c: c.root.rstrip("/").count("/"))
    shown = safe_line(widest.declared.removeprefix(f"{kind}:"))
    if (folder := glob_folder(widest.path)) is not None:
        # what a glob reaches: the files of its folder it matches (glob32)
        shown += f", which reaches {glob_words(widest.kind, listed([folder]))}"
    if widest is not members[0]:
        shown = f"widest: {shown}"
    return shown


def glob_lines(capabilities: Sequence[Capability]) -> list[str]:
    """``CAPABILITY -> only the files of FOLDER it matches ... (how)`` for each fs glob.

    A glob is granted as the files it matches at enable, each by itself (glob32); a
    write glob creates no file. Shown beside the grant on every screen a person
    consents on, so "the CSV reports" is read with when they are matched and what a
    write glob may not do (steer31 said the whole folder, which was the truth then).
    """
    lines = []
    for capability in capabilities:
        if glob_reach(capability) is None or not isinstance(capability, FsCapability):
            continue
        folder = glob_folder(capability.path)
        if folder is not None:
            shown = safe_line(str(capability))
            words = glob_words(capability.kind, listed([folder]))
            lines.append(f"{shown} -> {words} ({GLOB_REACH})")
    return lines


def default_glob(value: str, declared: str = "") -> str:
    """``", which reaches only the files of FOLDER it matches ..."`` when a templated
    path's default is a glob (``declared`` says whether it is a write)."""
    folder = glob_folder(value) if value.startswith("/") else None
    if folder is None:
        return ""
    kind = CapabilityKind.FS_WRITE if declared.startswith("fs.write:") else CapabilityKind.FS_READ
    return f", which reaches {glob_words(kind, listed([folder]))} ({GLOB_REACH})"


def show_consent(console: Console, request: ConsentRequest, reach: Sequence[Reach] = ()) -> None:
    """What a person consents to when enabling a plugin nobody approved (issue 14).

    Why consent is asked (and what changed since an earlier approval), the
    audit report (which carries the canary status and what it means, the
    declared capabilities and the composition lint), the capabilities as
    they will be granted and the plugins it requires. Plugin text is shown
    escaped, never as markup.
    """
    from caplet._host._agent_text import shown_entries
    from caplet._host._consent import describe_widening

    console.print(
        Text("Consent needed: ", style="bold yellow") + plain(request.why, multiline=True)
    )
    if request.widening is not None:
        for line in describe_widening(request.widening, whole=True):
            # Whole, and so as long as the plugin's text: wrapped inside (attack34).
            print_block(console, plain(f"  changed: {line}", "yellow"), margin=ENTRY_MARGIN)
    print_audit(console, request.audit)
    if not request.vouched_text and request.agent_text:
        # No approval vouches for it, and consent puts it before the agent (attack13d).
        # Shown before the grant, never between the grant and the question: it is the
        # plugin's text, and a hundred lines of it pushed the grant off the screen (steer22).
        console.print(plain("  the agent reads (consent puts it before the agent):"))
        print_entries(console, shown_entries(request.agent_text, whole=True))
    # What the plugin requires and the composition lint (a warning per read and egress
    # pair, as many as the plugin declares) come before the grant, never between it and
    # the question (steer32).
    if request.requires:
        print_wrapped(console, f"  it requires: {', '.join(request.requires)}")
    if request.composition:
        print_findings(console, request.composition, title="Capability composition")
    granted = request.granted if request.granted is not None else request.declared
    shown = listed(c.declared for c in granted) or "none"
    print_wrapped(console, f"  it will be granted: {shown}", "bold")
    summary = grant_summary(granted)
    for line in glob_lines(granted):
        print_wrapped(console, f"  which reaches:      {line}", "bold")
    for one in reach:
        # A template alone says nothing of what it grants (red-team round 4): the
        # author's default is shown, as `caplet approve` shows it.
        if one.value is None:
            what = f"nothing until {', '.join(one.missing) or 'a valid value'} is set"
        elif one.secret:
            what = "(a secret value, as configured)"
        else:
            origin = "the plugin's default" if one.by_default else "as configured"
            # Quoted when it holds a blank: "/tmp/x (read-only)" is one folder's name.
            what = f"{listed([one.value])} ({origin}){default_glob(one.value, one.declared)}"
        print_wrapped(console, f"  which reaches:      {one.declared} -> {what}", "bold")
    for line in request.programs:
        # A program's #! interpreter and loader are granted with it (red team round 19).
        print_wrapped(console, f"  which runs:         {line}", "bold")
    if summary:
        # Last, right above the question: what reaches and runs is a line per glob,
        # template and program, and sixty of them pushed the count that names the rare
        # capability off the screen (steer32).
        print_wrapped(console, f"  {summary}", "bold")


def _hook_state_style(state: HookState) -> str:
    from caplet._host._hook_model import HookState

    match state:
        case HookState.ACTIVE:
            return "green"
        case HookState.IDLE:
            return ""
        case HookState.UNAPPROVED | HookState.UNKNOWN_EVENT:
            return "yellow"
        case _:  # pragma: no cover - exhaustive
            assert_never(state)


def print_hook_statuses(console: Console, statuses: Sequence[HookStatus]) -> None:
    """One line per hook: event, function, priority, needed capability, and whether it runs."""
    for status in statuses:
        needs = f", needs {status.capability}" if status.capability else ""
        line = plain(
            f"  hook {status.event} -> {status.target} (priority {status.priority}{needs}): "
        )
        line.append_text(plain(status.reason, _hook_state_style(status.state)))
        console.print(line)


def _call_style(status: HookCallStatus) -> str:
    from caplet._host._hook_model import HookCallStatus

    match status:
        case HookCallStatus.OK:
            return "green"
        case HookCallStatus.SKIPPED | HookCallStatus.NOT_RUN:
            return "yellow"
        case (
            HookCallStatus.FAILED
            | HookCallStatus.TIMED_OUT
            | HookCallStatus.INVALID_OUTPUT
            | HookCallStatus.CIRCUIT_OPEN
        ):
            return "red"
        case _:  # pragma: no cover - exhaustive
            assert_never(status)


def print_hook_results(console: Console, results: HookResults) -> None:
    """The `caplet emit` table; Text, never markup: values and errors are plugin-controlled."""
    if not results.calls:
        console.print(plain(f"{results.event}: no enabled plugin subscribes to it"))
        return
    title = plain(f"{results.event} ({results.error_policy.value})")
    rows: list[list[Cell]] = []
    for call in results.calls:
        shown = call.error if call.error else json.dumps(jsonable(call.value))
        rows.append(
            [
                plain(call.plugin),
                plain(call.target),
                str(call.priority),
                Text(call.status.value, style=_call_style(call.status)),
                plain(shown, multiline=True, margin=0),  # a table places its lines
            ]
        )
    print_table(
        console, title, ("plugin", "function", "priority", "status", "result or error"), rows
    )
    if results.aborted_by is not None:
        console.print(plain(f"aborted by {results.aborted_by}", "red"))


def print_plugins(
    console: Console, plugins: Sequence[PluginInfo], broken: Sequence[BrokenPlugin]
) -> None:
    """The `caplet list` table, then the directories that were skipped."""
    columns = (
        "name",
        "version",
        "state",
        "approved",
        "risk",
        "trust",
        "capabilities",
        "description",
    )
    rows: list[list[Cell]] = []
    for info in plugins:
        risk = info.audit.risk_level.value if info.audit else "-"
        rows.append(
            [
                plain(info.name),
                plain(info.version),
                info.state.value,
                "yes" if info.approved else "no",
                Text(risk, style=_RISK_STYLE.get(risk, "")),
                trust_text(info),
                # One capability a line: each escaped on its own, so none can add a line.
                Text("\n").join(plain(str(c)) for c in info.capabilities) or "-",
                plain(info.description),
            ]
        )
    print_table(console, f"Plugins ({len(plugins)})", columns, rows)
    for item in broken:
        console.print(plain(f"skipped {item.directory.name}: {item.error}", "red", multiline=True))


_TIER_STYLE = {"trusted": "green", "community": "", "untrusted": "bold red"}
_SIGNATURE_STYLE = {
    "valid": "green",
    "untrusted-key": "yellow",
    "invalid": "bold red",
    "missing": "",
}


def trust_text(info: PluginInfo) -> Text:
    """``community (signature: missing)``: the tier, and the signature status that set it."""
    text = Text(info.tier.value, style=_TIER_STYLE[info.tier.value])
    status = info.signature.status.value
    text.append(f" (signature: {status})", style=_SIGNATURE_STYLE[status])
    return text


def print_findings(console: Console, findings: Sequence[Finding], *, title: str) -> None:
    """A findings table, most severe first (the order the scanner guarantees)."""
    if not findings:
        console.print(plain(f"{title}: no findings"))
        return
    rows: list[list[Cell]] = []
    for finding in findings:
        where = f"{finding.file}:{finding.line}" if finding.file else "manifest"
        rows.append(
            [
                Text(finding.severity.value, style=_SEVERITY_STYLE[finding.severity]),
                plain(finding.rule_id),
                plain(where),
                plain(finding.message, multiline=True, margin=0),  # a table places its lines
                plain(finding.capability or "-") if finding.covered else "-",
            ]
        )
    print_table(console, plain(title), ("severity", "rule", "where", "message", "covered by"), rows)


def print_scan_report(
    console: Console, report: ScanReport, *, label: str, verbose: bool = False
) -> None:
    """A scan report grouped by file, each finding with its line and source excerpt.

    Info findings (observed capabilities in package mode, covered ones in a
    plugin) are counted, and listed only with ``verbose``: a reviewer reads
    the danger and warning findings first.
    """
    counts = dict.fromkeys(Severity, 0)
    for finding in report.findings:
        counts[finding.severity] += 1
    parsed = (
        f", {report.files_parsed} needed the AST pass" if report.mode is ScanMode.PACKAGE else ""
    )
    print_line(
        console,
        Text.assemble(
            plain(f"Scan of {label}", "bold"),
            f" ({report.mode.value} mode): {report.files_scanned} files, "
            f"{report.bytes_scanned / 1e6:.2f} MB{parsed}",
        ),
    )
    shown = [f for f in report.findings if verbose or f.severity is not Severity.INFO]
    by_file: dict[str, list[Finding]] = {}
    for finding in shown:
        by_file.setdefault(finding.file or "(manifest)", []).append(finding)
    for file in sorted(by_file, key=lambda k: min(f.severity.rank for f in by_file[k])):
        console.print(plain(file, "bold underline"))
        for finding in by_file[file]:
            where = f"  {finding.line}:{finding.column}" if finding.line else "  -"
            print_line(
                console,
                Text.assemble(
                    (f"{where:>9} ", "dim"),
                    (f"{finding.severity.value:<7}", _SEVERITY_STYLE[finding.severity]),
                    plain(f" {finding.rule_id} "),
                    plain(finding.message),
                ),
            )
            if finding.excerpt:
                # The plugin's own source line: exactly where an ESC or a bidi override hides.
                print_line(console, plain(f"            {finding.excerpt}", "dim"))
    observed = sorted(
        {f.capability for f in report.findings if f.capability and not f.covered}
        if report.mode is ScanMode.PACKAGE
        else set()
    )
    if observed:
        # Package mode visits only what the prefilter flags, so this list is
        # a lower bound; say so rather than let it read as complete.
        console.print(
            plain(
                "observed capabilities (in the code the threat pass visited; --mode plugin "
                "checks every file): " + ", ".join(observed)
            )
        )
    hidden = counts[Severity.INFO] if not verbose else 0
    summary = (
        f"{counts[Severity.DANGER]} danger, {counts[Severity.WARNING]} warning, "
        f"{counts[Severity.INFO]} info"
    )
    if hidden:
        summary += " (info not listed: --verbose lists them)"
    console.print(Text(summary, style="bold red" if counts[Severity.DANGER] else "bold green"))


def print_rules(console: Console, rules: Sequence[Rule]) -> None:
    """The rule catalogue: id, kind, severity, family and one-line rationale."""
    rows: list[list[Cell]] = []
    for r in rules:
        severity = r.severity.value
        if r.covered_severity is not None and r.covered_by is not None:
            severity += f" ({r.covered_severity.value} with {r.covered_by.value})"
        rows.append(
            [
                r.rule_id,
                r.kind.value,
                Text(severity, style=_SEVERITY_STYLE[r.severity]),
                r.family.value,
                r.rationale,
            ]
        )
    print_table(
        console,
        "caplet scan rules (docs/rules.md has examples)",
        ("rule", "kind", "severity", "family", "why"),
        rows,
    )


def risk_text(audit: AuditResult) -> Text:
    """``MEDIUM (static-only)``, coloured by risk; a model audit names the model."""
    return plain(
        f"{audit.risk_level.value} ({audit.model_id or audit.provider}), "
        f"verdict {audit.verdict.value}",
        _RISK_STYLE[audit.risk_level.value],
    )
