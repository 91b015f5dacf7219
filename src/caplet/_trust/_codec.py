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
        return _ADAPTER.validate_json(text, strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '<payload>'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        raise StoreError(f"audit payload does not decode ({problems})") from exc
