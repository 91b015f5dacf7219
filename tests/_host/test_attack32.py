"""Red-team round 32 (attack32): guest code spending the host's CPU through its messages.

The guest's attack runs in a real guest sandbox on the strict launcher; each attack test
failed on main at 7d18d3a3, the near misses show honest use still works.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caplet import GuestLimits, GuestStatus, Policy
from caplet._host._host import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._suggest import MAX_SUGGESTION_DISTANCE, did_you_mean, levenshtein
from tests._host.ctxkit import make_host, plugin
from tests.conftest import PluginFactory

SOURCE = """
def create_functions(config):
    def list_items():
        return ["a", "b"]

    def count_items():
        return 2

    return {"store": {"list_items": list_items, "count_items": count_items}}
"""

#: Guest code that takes the runner's own transport (the finder it installed) and sends
#: ``guest.call`` for a function of 200,000 characters, ``times`` times, counting the
#: refusals it got back. The runner checks names before it sends; the host must not
#: trust that, and must refuse a forged name as cheaply as a short one.
FORGED = """
import sys
from caplet._sandbox._protocol import ContextOp
finder = next(f for f in sys.meta_path if hasattr(f, "_transport"))
refused = []
for _ in range({times}):
    try:
        finder._transport.request(
            ContextOp.GUEST_CALL,
            {{"module": "store", "function": "f" * 200_000, "args": [], "kwargs": {{}}}},
        )
    except Exception as exc:
        refused.append(type(exc).__name__)
refused
"""


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxLauncher]:
    launcher = SandboxLauncher(strict=True)
    yield launcher
    launcher.close()


@pytest.fixture
def host(
    plugins_dir: Path, state_dir: Path, sandbox: SandboxLauncher, make_plugin: PluginFactory
) -> Iterator[PluginHost]:
    plugin(make_plugin, "store", SOURCE, module="store", functions=("list_items", "count_items"))
    policy = Policy(guest=GuestLimits(pool_size=0))
    with make_host(plugins_dir, state_dir, sandbox, policy=policy) as h:
        h.discover()
        outcome = h.enable("store", consent=True)
        assert outcome, outcome.reason
        yield h


def test_a_forged_long_function_name_costs_the_host_no_more_than_a_short_one(
    host: PluginHost,
) -> None:
    """attack32: the host answered a guest's unknown ``host.<module>.<function>`` with a
    "did you mean" computed by an edit distance in pure Python, the product of the two
    lengths, in the host's process (outside the sandbox's CPU limits, the GIL held): a
    forged function name of 200,000 characters cost seconds each (13 s at 250,000), so 20
    of them outlasted the snippet's 10 s deadline and the snippet was killed with the
    host still computing. Now a name that long gets no suggestion, and the 20 refusals
    come back at once. (The same distance served a plugin's ``ctx.plugins.call`` target
    and a manifest's unknown key: tests/test_suggest.py's rows below.)"""
    result = host.exec(FORGED.format(times=20), timeout=10)
    assert result.status is GuestStatus.OK, result.error
    assert result.value == ["NotGrantedError"] * 20
    logged = [
        d.detail
        for d in host.manager.store.decisions("store")
        if d.action == "guest.call" and not d.allowed
    ]
    assert len(logged) == 20
    assert "has no function 'ffff" in logged[0]
    assert "did you mean" not in logged[0]


def test_a_mistyped_function_still_gets_its_suggestion(host: PluginHost) -> None:
    """The near miss: a short misspelling is refused with the suggestion, as before."""
    result = host.exec(
        "import host.store\ntry:\n    host.store.list_itemz()\nexcept Exception as e:\n"
        "    message = str(e)\nmessage"
    )
    assert result.status is GuestStatus.OK, result.error
    assert isinstance(result.value, str)
    assert "did you mean 'list_items'?" in result.value


def test_a_name_past_the_suggestion_limit_gets_none() -> None:
    """attack32, the rule itself: main suggested for a 1,000-character name (after a
    million-cell distance table; a manifest key of 100,000 characters took 4 s of CPU
    to load, a 1 MiB manifest's key about a minute, at every discovery)."""
    assert did_you_mean("a" * 1000, ["a" * 999]) == ""
    assert did_you_mean("a" * 257, ["a" * 256]) == ""
    assert did_you_mean("a" * 256, ["a" * 255]) == " (did you mean '" + "a" * 255 + "'?)"


@given(
    name=st.text(alphabet="abc", max_size=12),
    candidates=st.lists(st.text(alphabet="abc", max_size=12), max_size=6),
)
def test_skipping_candidates_by_length_never_changes_the_suggestion(
    name: str, candidates: list[str]
) -> None:
    """The near miss, exactly: a candidate is skipped only when the length difference
    alone puts it beyond the best distance so far, so the suggestion is the one a full
    comparison of every candidate gives (first candidate wins ties)."""
    best: str | None = None
    best_distance = MAX_SUGGESTION_DISTANCE + 1
    for candidate in candidates:
        distance = levenshtein(name, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    expected = f" (did you mean {best!r}?)" if best is not None else ""
    assert did_you_mean(name, candidates) == expected
