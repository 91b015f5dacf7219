"""The administrator's limits on the decision log (``caplet log``): rate and retention.

``Policy.log`` holds one :class:`LogLimits`. The decision log is the record
of what every plugin was allowed and refused; a plugin that makes thousands
of refused requests must not push every earlier decision out of view, and
the log must not grow without end (issue 15).
"""

from __future__ import annotations

from pydantic.dataclasses import dataclass

from caplet._errors import PolicyError
from caplet._validated import MODEL_CONFIG, Count, Positive, validated

__all__ = ["LogLimits"]


@validated(PolicyError, "log limits")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class LogLimits:
    """How much of the decision log is written and kept.

    ``denials_per_minute``: refused decisions recorded one by one per plugin
    in a sliding minute; the rest are counted and written as one summary row
    per action ("N more denials of ..."), when the next refusal passes and
    when the host closes. 0 records only the summaries.

    ``allowed_per_minute``: the same for the allowed requests a plugin drives
    itself (an HTTP hop, a ``host.call``, an ``app`` request: up to 10,000 in
    one call), so that its allowed calls cannot push its earlier refusals out
    of the log. Decisions about a plugin (approve, enable, quarantine ...)
    are always written.

    ``retention_days`` and ``max_rows``: rows older than this many days, and
    the oldest rows beyond this many, are deleted when a host starts and
    every few hundred writes after; beyond ``max_rows`` allowed rows go
    before refusals and the policy's own rows.
    """

    denials_per_minute: Count = 60
    allowed_per_minute: Count = 600
    retention_days: Positive = 90
    max_rows: Positive = 100_000
