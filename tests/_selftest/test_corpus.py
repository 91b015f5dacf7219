"""Issue 8: the hostile corpus, run through the same bench ``caplet selftest`` uses.

One test per case of :data:`caplet._selftest._corpus.CASES`: the attack must
be stopped by the layer the case names (its evidence, checked by the case)
and contained (checked by the bench after every case: the jail is gone, the
host serves another plugin, sources and the state database are intact, no
listener was reached, the decoy host process lives, the host's /tmp is
clean). This machine has every isolation layer, so anything but
``contained`` is a failure here. One module-scoped bench (one host, one
zygote) serves every case, as in the selftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from caplet._selftest._bench import Bench
from caplet._selftest._corpus import CASES
from caplet._selftest._model import HostileCase
from caplet._selftest._report import CaseStatus


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    root = tmp_path_factory.mktemp("selftest")
    with pytest.MonkeyPatch.context() as patch:
        # The module-scoped bench outlives each test's own HOME override.
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("XDG_STATE_HOME", str(root / "home" / ".state"))
        patch.setenv("XDG_CONFIG_HOME", str(root / "home" / ".config"))
        with Bench(CASES, root / "arena") as bench:
            # Every layer is in force on this machine (the fork and thread
            # bombs need the optional pids cgroup too).
            assert bench.layers == dict.fromkeys(bench.layers, ""), bench.layers
            assert set(bench.layers) == {"namespaces", "rlimits", "landlock", "seccomp", "cgroup"}
            yield bench


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_case_is_contained_by_its_layer(case: HostileCase, bench: Bench) -> None:
    result = bench.run(case)
    assert result.name == case.name
    assert not result.layer_missing
    assert result.status is CaseStatus.CONTAINED, (
        f"{case.name} ({case.attack}): expected {case.layer.value} to stop it; "
        f"{result.status.value}: {result.outcome} [{result.detail}]"
    )
    assert result.passed
