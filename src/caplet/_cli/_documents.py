"""caplet's records as the JSON documents of ``--json``.

Built from the same frozen records the library returns, so ``--json`` shows
exactly what the Python API would; secrets are redacted before anything leaves
this module. Apart from the rich tables (:mod:`caplet._cli._render`) because a
``--json`` run never draws one: ``caplet scan --json`` starts without importing
rich at all (issue 16: start-up <= 150 ms of CPU).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from caplet._findings import Finding

if TYPE_CHECKING:
    from caplet._audit._model import AuditResult
    from caplet._capabilities._model import Capability
    from caplet._config._schema import ConfigField
    from caplet._host._hook_model import HookResults
    from caplet._host._records import BrokenPlugin, PluginInfo
    from caplet._manifest._model import Hook

__all__ = [
    "JSONValue",
    "approved_review",
    "audit_json",
    "broken_json",
    "finding_json",
    "hook_json",
    "hook_results_json",
    "jsonable",
    "plugin_json",
    "when",
]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None


def jsonable(value: object) -> JSONValue:
    """Convert records (dataclasses, enums, paths, tuples, bytes) into JSON values."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        # As the MCP server sends bytes (caplet._mcp._server): a list of one int per
        # byte was 4-5 characters a byte, and one line a byte in the human output.
        return {"base64": base64.b64encode(value).decode("ascii")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def finding_json(finding: Finding) -> JSONValue:
    return jsonable(finding)


def audit_json(audit: AuditResult) -> JSONValue:
    """Every field of the audit, plus the derived labels a program would otherwise recompute."""
    from caplet._audit._report import canary_meaning

    document = jsonable(audit)
    assert isinstance(document, dict)
    document["static_only"] = audit.static_only
    document["model_id"] = audit.model_id
    document["recommendation"] = audit.verdict.value
    document["canary_meaning"] = canary_meaning(audit)
    return document


def plugin_json(info: PluginInfo, *, detail: bool = False) -> dict[str, JSONValue]:
    """One plugin as JSON; config values of secret fields are masked."""
    from caplet._config._coerce import redact

    document: dict[str, JSONValue] = {
        "name": info.name,
        "version": info.version,
        "description": info.description,
        "path": str(info.path),
        "state": info.state.value,
        "approved": info.approved,
        # What reviewed the approved content (steer37): the approval carries over to a
        # new version only on that review, and no document said which it was.
        "review": approved_review(info),
        "content_hash": info.content_hash,
        "risk_level": info.audit.risk_level.value if info.audit else None,
        "audit_provider": info.audit.provider if info.audit else None,
        "capabilities": [str(c) for c in info.capabilities],
        "globs": globs_json(info.capabilities),
        "quarantined": info.quarantine is not None,
        "source": jsonable(info.source),
        "tier": info.tier.value,
        "signature": jsonable(info.signature),
        "inert_reason": info.inert_reason or None,
    }
    if detail:
        manifest = info.manifest
        document.update(
            {
                "entry": manifest.entry,
                "modules": {m.name: list(m.function_names) for m in manifest.modules},
                "hooks": [hook_json(h) for h in manifest.hooks],
                "requires": [str(r) for r in manifest.requires],
                "config_schema": [_field_json(f) for f in manifest.config],
                "config": jsonable(redact(manifest.config, info.config)),
                "limits": jsonable(manifest.limits),
                "approval": jsonable(info.approval),
                "audit": jsonable(info.audit),
                "quarantine": jsonable(info.quarantine),
            }
        )
    return document


def approved_review(info: PluginInfo) -> str | None:
    """What reviewed the approval of ``info``'s content: ``"<provider>:<model> at <api
    root>"`` or ``"static-only"``; None when it is not approved, or approved before caplet
    recorded the review (``approved`` tells the two apart)."""
    if not info.approved or info.approval is None:
        return None
    return info.approval.review


def globs_json(capabilities: Sequence[Capability]) -> JSONValue:
    """What each fs glob among ``capabilities`` reaches (glob32): the capability, the
    words every consent screen shows, and how a glob is granted."""
    from caplet._capabilities._model import GLOB_REACH, glob_reach

    return [
        {"capability": str(c), "reaches": reach, "how": GLOB_REACH}
        for c in capabilities
        if (reach := glob_reach(c)) is not None
    ]


def hook_json(hook: Hook) -> JSONValue:
    """A manifest hook as JSON (``caplet info`` replaces it with its status when it can)."""
    return {
        "event": hook.event,
        "target": hook.target,
        "priority": hook.priority,
        "capability": hook.capability.declared if hook.capability is not None else None,
        "description": hook.description,
    }


def hook_results_json(results: HookResults) -> dict[str, JSONValue]:
    """An emit's results: one entry per subscriber, in call order."""
    return {
        "ok": results.ok,
        "event": results.event,
        "error_policy": results.error_policy.value,
        "aborted_by": results.aborted_by,
        "calls": [jsonable(call) for call in results.calls],
    }


def _field_json(field: ConfigField) -> JSONValue:
    """A schema field as JSON; a secret field's default is masked like its value."""
    from caplet._config._coerce import SECRET_MASK

    document = jsonable(field)
    assert isinstance(document, dict)
    if field.secret and field.default is not None:
        document["default"] = SECRET_MASK
    return document


def broken_json(broken: BrokenPlugin) -> JSONValue:
    return {"directory": str(broken.directory), "error": broken.error}


def when(at: float) -> str:
    """A wall-clock time as the CLI shows it (local time, to the second)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
