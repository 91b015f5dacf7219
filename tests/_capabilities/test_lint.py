"""Composition lint: exfiltration pairs, shells, wildcard hosts."""

from __future__ import annotations

from caplet._capabilities._lint import (
    MAX_EXFILTRATION_FINDINGS,
    RULE_EXFILTRATION,
    RULE_SHELL,
    RULE_TEMPLATED_PROGRAM,
    RULE_WILDCARD_HOST,
    lint_composition,
)
from caplet._capabilities._model import Capability
from caplet._capabilities._parse import parse_capability
from caplet._findings import Severity


def caps(*texts: str, config_names: tuple[str, ...] = ()) -> list[Capability]:
    return [parse_capability(t, config_names=config_names) for t in texts]


def exfiltration_pairs(capabilities: list[Capability]) -> list[str | None]:
    return [f.capability for f in lint_composition(capabilities) if f.rule_id == RULE_EXFILTRATION]


def test_no_capabilities_no_findings() -> None:
    assert lint_composition([]) == []


def test_read_alone_or_egress_alone_is_fine() -> None:
    assert lint_composition(caps("fs.read:/data", "env.read:HOME")) == []
    assert lint_composition(caps("net.http:https://example.com", "app:email.send")) == []


def test_fs_read_plus_net_http_is_an_exfiltration_path() -> None:
    findings = lint_composition(caps("fs.read:/data", "net.http:https://example.com"))
    assert len(findings) == 1
    finding = findings[0]
    assert finding.rule_id == "CAP001"
    assert finding.severity is Severity.WARNING
    assert finding.message.startswith(
        "exfiltration path: fs.read:/data + net.http:https://example.com"
    )
    assert finding.capability == "fs.read:/data, net.http:https://example.com"
    assert finding.file == ""
    assert finding.line == 0


def test_env_read_plus_app_send() -> None:
    assert exfiltration_pairs(caps("env.read:TOKEN", "app:email.send")) == [
        "env.read:TOKEN, app:email.send"
    ]


def test_app_read_plus_net_http() -> None:
    assert exfiltration_pairs(caps("app:content.get_entry", "net.http:https://x.example.com")) == [
        "app:content.get_entry, net.http:https://x.example.com"
    ]


def test_app_read_plus_app_read_is_fine() -> None:
    assert lint_composition(caps("app:content.list", "app:users.lookup")) == []


def test_unclassified_app_capability_counts_as_both() -> None:
    # "app:content.frobnicate" names neither a read nor a send: fail closed.
    assert exfiltration_pairs(caps("app:content.frobnicate", "fs.read:/data")) == [
        "fs.read:/data, app:content.frobnicate"
    ]
    assert exfiltration_pairs(caps("app:content.frobnicate", "net.http:https://example.com")) == [
        "app:content.frobnicate, net.http:https://example.com"
    ]


def test_unclassified_app_is_not_paired_with_itself() -> None:
    assert lint_composition(caps("app:content.frobnicate")) == []


def test_proc_exec_reads_and_egresses_but_not_with_itself() -> None:
    assert lint_composition(caps("proc.exec:git")) == []
    assert exfiltration_pairs(caps("proc.exec:git", "proc.exec:curl")) == [
        "proc.exec:curl, proc.exec:git",
        "proc.exec:git, proc.exec:curl",
    ]
    assert exfiltration_pairs(caps("proc.exec:git", "fs.read:/repo")) == [
        "fs.read:/repo, proc.exec:git"
    ]


def test_fs_write_with_fs_read_is_fine() -> None:
    assert lint_composition(caps("fs.read:/data", "fs.write:/data/out")) == []


def test_host_call_is_not_linted_here() -> None:
    assert lint_composition(caps("host.call:other", "fs.read:/data")) == []


def test_shell_is_danger() -> None:
    findings = lint_composition(caps("proc.exec:bash"))
    assert [(f.rule_id, f.severity) for f in findings] == [(RULE_SHELL, Severity.DANGER)]
    assert findings[0].message.startswith(
        "proc.exec:bash is equivalent to every capability (it runs arbitrary code)"
    )
    assert findings[0].capability == "proc.exec:bash"


def test_templated_program_is_a_warning() -> None:
    findings = lint_composition(caps("proc.exec:${config.prog}", config_names=("prog",)))
    assert [(f.rule_id, f.severity) for f in findings] == [
        (RULE_TEMPLATED_PROGRAM, Severity.WARNING)
    ]
    assert "runs whichever program the configuration names" in findings[0].message


def test_wildcard_host_is_info() -> None:
    findings = lint_composition(caps("net.http:https://*.example.com"))
    assert [(f.rule_id, f.severity) for f in findings] == [(RULE_WILDCARD_HOST, Severity.INFO)]
    assert findings[0].message == (
        "net.http:https://*.example.com reaches every subdomain of example.com"
    )


def test_order_is_danger_warning_info_then_message() -> None:
    findings = lint_composition(
        caps(
            "net.http:https://*.example.com",
            "proc.exec:sh",
            "fs.read:/b",
            "fs.read:/a",
        )
    )
    assert [f.severity for f in findings] == sorted(
        (f.severity for f in findings), key=lambda s: s.rank
    )
    assert findings[0].rule_id == RULE_SHELL
    assert findings[-1].rule_id == RULE_WILDCARD_HOST
    warnings = [f.message for f in findings if f.severity is Severity.WARNING]
    assert warnings == sorted(warnings)


def test_deterministic_regardless_of_input_order() -> None:
    texts = ["fs.read:/a", "net.http:https://example.com", "env.read:X", "proc.exec:git"]
    assert lint_composition(caps(*texts)) == lint_composition(caps(*reversed(texts)))


def test_duplicate_capabilities_are_linted_once() -> None:
    findings = lint_composition(caps("fs.read:/a", "fs.read:/a/", "net.http:https://example.com"))
    assert len(findings) == 1


def test_many_pairs_are_capped_with_a_summary() -> None:
    reads = [f"fs.read:/data/{i:02d}" for i in range(6)]
    egress = [f"net.http:https://h{i}.example.com" for i in range(5)]
    findings = lint_composition(caps(*reads, *egress))
    exfil = [f for f in findings if f.rule_id == RULE_EXFILTRATION]
    assert len(exfil) == MAX_EXFILTRATION_FINDINGS + 1
    summary = exfil[-1]
    assert summary.message.startswith("exfiltration paths: 10 more read + egress pairs not listed")
    assert "(6 read and 5 egress capabilities in all)" in summary.message
    assert all(f.message.startswith("exfiltration path: ") for f in exfil[:-1])


def test_exactly_the_cap_has_no_summary() -> None:
    reads = [f"fs.read:/data/{i:02d}" for i in range(4)]
    egress = [f"net.http:https://h{i}.example.com" for i in range(5)]
    findings = lint_composition(caps(*reads, *egress))
    assert len(findings) == MAX_EXFILTRATION_FINDINGS
    assert not any(f.message.startswith("exfiltration paths:") for f in findings)
