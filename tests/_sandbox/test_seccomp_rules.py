"""The allowlist's rule builders: ``none_of`` exact, on the bits the kernel reads."""

from __future__ import annotations

import itertools
import random

import pytest

from caplet._sandbox._seccomp_rules import Rule, none_of


def _holds(rules: tuple[Rule, ...], args: dict[int, int]) -> bool:
    return any(all(args.get(c.arg, 0) & c.mask == c.value for c in rule) for rule in rules)


@pytest.mark.parametrize("seed", range(20))
def test_none_of_is_exact_on_small_widths(seed: int) -> None:
    rng = random.Random(seed)
    width = 6
    refused = set(rng.sample(range(1 << width), rng.randint(1, 4)))
    rules = none_of(0, refused, width=width)
    for value in range(1 << width):
        assert _holds(rules, {0: value}) == (value not in refused), (refused, value)


def test_none_of_refuses_terminal_injection_whatever_the_high_half() -> None:
    refused = (0x5412, 0x541C)
    rules = none_of(1, refused)
    assert all(c.mask <= 0xFFFF_FFFF for rule in rules for c in rule)
    for value in refused:
        for high in (0, 1, 0xFFFF_FFFF):
            assert not _holds(rules, {1: high << 32 | value})
    # Every value one or two bits away is allowed, and so is a random sample.
    for value, a, b in itertools.product(refused, range(32), range(32)):
        neighbour = value ^ (1 << a) ^ (1 << b)
        if neighbour not in refused:
            assert _holds(rules, {1: neighbour}), hex(neighbour)
    rng = random.Random(13)
    for _ in range(20_000):
        value = rng.getrandbits(64)
        assert _holds(rules, {1: value}) == (value & 0xFFFF_FFFF not in refused)
    # A common request matches the first rule: the common case costs one comparison.
    assert _holds(rules[:1], {1: 0x5401})  # TCGETS
    assert len(rules) <= 34
