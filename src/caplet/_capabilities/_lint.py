"""Composition lint: risks that come from capabilities *together* (defence layer 3).

Each capability may be narrow and still combine into something dangerous:
anything that reads data plus anything that can send data out is an
exfiltration path, and ``proc.exec`` of a shell or interpreter is every
capability at once. The findings are shown to the approver at install time
(design.md section 3); they do not refuse anything by themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import assert_never

from caplet._capabilities._model import (
    AppCapability,
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._findings import Finding, Severity

__all__ = [
    "APP_READ_VERBS",
    "APP_SEND_VERBS",
    "MAX_EXFILTRATION_FINDINGS",
    "RULE_EXFILTRATION",
    "RULE_SHELL",
    "RULE_TEMPLATED_PROGRAM",
    "RULE_WILDCARD_HOST",
    "lint_composition",
]

RULE_EXFILTRATION = "CAP001"
RULE_SHELL = "CAP002"
RULE_WILDCARD_HOST = "CAP003"
RULE_TEMPLATED_PROGRAM = "CAP004"

#: Pairs listed one by one; the rest are summarised in one finding so that a
#: plugin with many capabilities does not bury the other findings.
MAX_EXFILTRATION_FINDINGS = 20

#: Words in the last segment of an ``app:`` capability that name a read...
APP_READ_VERBS = frozenset({"read", "get", "list", "query", "search", "fetch", "load", "lookup"})
#: ... and those that name a send.
APP_SEND_VERBS = frozenset(
    {
        "send", "post", "publish", "upload", "notify", "write", "put", "push",
        "email", "message", "webhook",
    }
)  # fmt: skip

_WORD_SPLIT_RE = re.compile(r"[_-]")


def lint_composition(capabilities: Sequence[Capability]) -> list[Finding]:
    """Findings about the capability set as a whole, deterministically ordered.

    Rules: ``CAP001`` (warning) each read capability with each *different*
    egress capability; ``CAP002`` (danger) ``proc.exec`` of a shell or
    interpreter; ``CAP003`` (info) each wildcard ``net.http`` host;
    ``CAP004`` (warning) a ``proc.exec`` whose program comes from
    configuration. Findings are about the manifest, so ``file`` is ``""``
    and ``line`` 0.
    """
    unique = list(dict.fromkeys(capabilities))
    findings: list[Finding] = []
    for capability in unique:
        findings.extend(_single(capability))
    findings.extend(_exfiltration(unique))
    findings.sort(key=lambda f: (f.sort_key(), f.message))
    return findings


def _single(capability: Capability) -> list[Finding]:
    """Findings about one capability on its own."""
    text = str(capability)
    if isinstance(capability, ProcExecCapability):
        if capability.templated:
            return [
                Finding(
                    RULE_TEMPLATED_PROGRAM,
                    Severity.WARNING,
                    f"{text} runs whichever program the configuration names; check the "
                    f"configured value, since a shell or interpreter there would be "
                    f"equivalent to every capability",
                    capability=text,
                )
            ]
        if capability.is_shell_or_interpreter:
            return [
                Finding(
                    RULE_SHELL,
                    Severity.DANGER,
                    f"{text} is equivalent to every capability (it runs arbitrary code); "
                    f"declare the specific program the plugin needs instead",
                    capability=text,
                )
            ]
    if isinstance(capability, NetHttpCapability) and capability.wildcard:
        return [
            Finding(
                RULE_WILDCARD_HOST,
                Severity.INFO,
                f"{text} reaches every subdomain of {capability.host}",
                capability=text,
            )
        ]
    return []


def _exfiltration(capabilities: list[Capability]) -> list[Finding]:
    reads = sorted((c for c in capabilities if _is_read(c)), key=str)
    egresses = sorted((c for c in capabilities if _is_egress(c)), key=str)
    pairs = [(r, e) for r in reads for e in egresses if r != e]
    findings = [
        Finding(
            RULE_EXFILTRATION,
            Severity.WARNING,
            f"exfiltration path: {read} + {egress} (what the plugin reads can be sent "
            f"out through the second)",
            capability=f"{read}, {egress}",
        )
        for read, egress in pairs[:MAX_EXFILTRATION_FINDINGS]
    ]
    hidden = len(pairs) - MAX_EXFILTRATION_FINDINGS
    if hidden > 0:
        # "paths:" sorts after every "path: ..." message, so the summary
        # comes last among the CAP001 findings.
        findings.append(
            Finding(
                RULE_EXFILTRATION,
                Severity.WARNING,
                f"exfiltration paths: {hidden} more read + egress pairs not listed "
                f"({len(reads)} read and {len(egresses)} egress capabilities in all)",
                capability=", ".join(str(c) for c in capabilities),
            )
        )
    return findings


def _app_words(capability: AppCapability) -> set[str]:
    last = capability.name.rsplit(".", 1)[-1]
    return set(_WORD_SPLIT_RE.split(last))


def _app_is_unclassified(capability: AppCapability) -> bool:
    # An app capability whose name says neither read nor send could be
    # either: count it as both (fail closed) rather than hide a path.
    words = _app_words(capability)
    return not (words & APP_READ_VERBS) and not (words & APP_SEND_VERBS)


def _is_read(capability: Capability) -> bool:
    """True when the capability lets the plugin obtain data."""
    if isinstance(capability, FsCapability):
        return capability.kind is CapabilityKind.FS_READ
    if isinstance(capability, EnvReadCapability):
        return True
    if isinstance(capability, ProcExecCapability):
        return True  # a program's output is data (git log, cat ...)
    if isinstance(capability, AppCapability):
        return bool(_app_words(capability) & APP_READ_VERBS) or _app_is_unclassified(capability)
    if isinstance(capability, NetHttpCapability | HostCallCapability):
        # net.http is counted as egress; host.call reaches only what the
        # other plugin's own capabilities allow, and is linted with it.
        return False
    assert_never(capability)


def _is_egress(capability: Capability) -> bool:
    """True when the capability lets data leave the sandbox."""
    if isinstance(capability, NetHttpCapability | ProcExecCapability):
        return True
    if isinstance(capability, AppCapability):
        return bool(_app_words(capability) & APP_SEND_VERBS) or _app_is_unclassified(capability)
    if isinstance(capability, FsCapability | EnvReadCapability | HostCallCapability):
        # fs.write is not counted: a written file stays on this machine.
        return False
    assert_never(capability)
