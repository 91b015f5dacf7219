"""The fuzzing budget: small in the normal suite, raised for an opt-in long run.

``CAPLET_FUZZ_EXAMPLES=5000 pytest tests/_fuzz`` runs every property of
this package with that many examples (docs/security.md, "Fuzzing").
Deadlines are off (a loaded CI machine must not turn a slow example into a
failure) and no example database is written next to the repository.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES_ENV = "CAPLET_FUZZ_EXAMPLES"


def examples(default: int) -> int:
    """``default``, or the number in ``CAPLET_FUZZ_EXAMPLES`` when it is set."""
    raw = os.environ.get(FUZZ_EXAMPLES_ENV, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{FUZZ_EXAMPLES_ENV} must be a positive integer, got {raw!r}")
    return int(raw)


def fuzz(default: int = 60) -> settings:
    """Hypothesis settings for one property, with the budget above."""
    return settings(
        max_examples=examples(default),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
