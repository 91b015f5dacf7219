"""Per-plugin rate and data budget over sliding windows, on a clock the test moves."""

from __future__ import annotations

import pytest

from caplet._broker._limits import RateLimiter
from caplet._broker._policy import NetworkPolicy
from caplet._errors import RateLimitError
from tests._broker.conftest import FakeClock


def _limiter(clock: FakeClock, **limits: int) -> RateLimiter:
    return RateLimiter(NetworkPolicy(**limits), clock)  # type: ignore[arg-type]


def test_per_minute_window_slides() -> None:
    clock = FakeClock()
    limiter = _limiter(clock, requests_per_minute=2)
    limiter.admit("p")
    clock.now += 30
    limiter.admit("p")
    with pytest.raises(RateLimitError) as exc:
        limiter.admit("p")
    assert exc.value.plugin == "p"
    assert exc.value.category == "rate limited"
    assert "made 2 requests in the last minute (limit 2 per minute)" in str(exc.value)
    clock.now += 30  # the first request is now exactly a minute old
    limiter.admit("p")
    with pytest.raises(RateLimitError):
        limiter.admit("p")


def test_per_hour_window() -> None:
    clock = FakeClock()
    limiter = _limiter(clock, requests_per_minute=100, requests_per_hour=3)
    for _ in range(3):
        limiter.admit("p")
        clock.now += 120
    with pytest.raises(RateLimitError) as exc:
        limiter.admit("p")
    assert "made 3 requests in the last hour (limit 3 per hour)" in str(exc.value)
    assert "NetworkPolicy.requests_per_hour" in str(exc.value)
    clock.now += 3600 - 360 + 1
    limiter.admit("p")


def test_plugins_are_counted_separately() -> None:
    limiter = _limiter(FakeClock(), requests_per_minute=1)
    limiter.admit("a")
    limiter.admit("b")
    with pytest.raises(RateLimitError):
        limiter.admit("a")


def test_data_budget() -> None:
    clock = FakeClock()
    limiter = _limiter(clock, bytes_per_hour=100)
    assert limiter.budget_left("p") == 100
    limiter.spend("p", 60)
    limiter.spend("p", 0)
    limiter.spend("p", -5)
    assert limiter.budget_left("p") == 40
    limiter.admit("p")
    clock.now += 1800
    limiter.spend("p", 50)
    assert limiter.budget_left("p") == 0
    with pytest.raises(RateLimitError) as exc:
        limiter.admit("p")
    assert exc.value.category == "data budget exhausted"
    assert str(exc.value).startswith(
        "data budget exhausted: plugin 'p' transferred 110 bytes in the last hour (budget 100)"
    )
    clock.now += 1800  # the first 60 bytes leave the window
    assert limiter.budget_left("p") == 50
    limiter.admit("p")
