"""JSON encoding of :class:`~caplet._audit._model.AuditResult` for the state store.

pydantic's ``TypeAdapter`` understands the frozen dataclasses and enums
directly (enums are written by value), and validates every field on the way
back in, so a tampered or truncated payload is refused instead of producing
a half-built audit.
"""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from caplet._audit._model import AuditResult
from caplet._errors import StoreError
from caplet._numbers import instant, shown_number

__all__ = ["audit_from_json", "audit_to_json"]

_ADAPTER: TypeAdapter[AuditResult] = TypeAdapter(AuditResult)


def audit_to_json(audit: AuditResult) -> str:
    """Every field of *audit* as one JSON object (findings included)."""
    return _ADAPTER.dump_json(audit).decode("utf-8")


def audit_from_json(text: str) -> AuditResult:
    """Decode what :func:`audit_to_json` wrote.

    Strict validation: no type coercion, unknown enum values are refused.
    Raises :class:`StoreError` (describing the first problems) when *text*
    is not such a payload; the store adds the table and key.
    """
    try:
        audit = _ADAPTER.validate_json(text, strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '<payload>'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        raise StoreError(f"audit payload does not decode ({problems})") from exc
    if instant(audit.created_at) is None:
        # 0.0 is the model's default (an audit of an earlier caplet); a time past year
        # 9999 or not finite made the approval screen's date raise OverflowError
        raise StoreError(
            "audit payload does not decode (created_at: "
            f"{shown_number(audit.created_at)} is no time caplet wrote)"
        )
    return audit
