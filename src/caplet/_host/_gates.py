"""Why the static gate refuses a plugin: its danger findings no capability covers.

The messages name each finding (rule, file, line) and the fix: remove the
code or declare the capability, review the auditor's verdict (which no
capability covers), or, in locked mode, the lock entry that withholds the
capability the finding needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from caplet._audit._model import AuditResult
from caplet._capabilities._model import Capability
from caplet._findings import Finding, Severity
from caplet._host._locked import withheld_message

__all__ = ["danger_message", "uncovered_dangers", "withheld_refusal"]

#: Rule-id prefix of findings the LLM auditor produces (caplet._audit._deep).
_AUDITOR_RULES = "CPL-AUDIT-"


def uncovered_dangers(audit: AuditResult) -> list[Finding]:
    return [f for f in audit.findings if f.severity is Severity.DANGER and not f.covered]


def danger_message(name: str, dangers: Sequence[Finding]) -> str:
    shown = "; ".join(
        f"{f.rule_id} {f.message} ({f.file}:{f.line})" if f.file else f"{f.rule_id} {f.message}"
        for f in dangers[:5]
    )
    more = f" and {len(dangers) - 5} more" if len(dangers) > 5 else ""
    if any(f.rule_id.startswith(_AUDITOR_RULES) for f in dangers):
        # The auditor's verdicts (compromised, injection, inaccurate
        # description) are about the plugin as a whole: no capability covers them.
        fix = (
            f"review the audit report (`caplet audit {name} --verbose`) and fix the plugin; "
            "findings of the LLM auditor cannot be covered by a capability"
        )
    else:
        fix = "remove that code or declare the capability it needs"
    return (
        f"plugin {name!r} is refused by {len(dangers)} danger finding(s) that no declared "
        f"capability covers: {shown}{more}; {fix}"
    )


def _needs(finding: Finding, capability: Capability) -> bool:
    """Whether *capability* is what would cover *finding* (exactly, or by its kind)."""
    return finding.capability in {capability.declared, str(capability), capability.kind.value}


def withheld_refusal(
    name: str, dangers: Sequence[Finding], withheld: Sequence[Capability], lock_path: Path
) -> str:
    """The refusal when danger findings are uncovered because the lock withholds their
    capability: they name what they need and the lock entry, not "declare it"."""
    needing = [(f, c) for f in dangers for c in withheld if _needs(f, c)]
    if not needing:
        return danger_message(name, dangers)
    shown = "; ".join(
        f"{f.rule_id} at {f.file}:{f.line} needs {c.declared}"
        if f.file
        else f"{f.rule_id} needs {c.declared}"
        for f, c in needing[:5]
    )
    used = tuple(dict.fromkeys(c for _, c in needing))
    message = (
        f"plugin {name!r} is refused by {len(needing)} danger finding(s) that only withheld "
        f"capabilities would cover ({shown}): {withheld_message(name, used, lock_path)}"
    )
    others = [f for f in dangers if not any(_needs(f, c) for c in withheld)]
    if others:
        message += f"; and {danger_message(name, others)}"
    return message
