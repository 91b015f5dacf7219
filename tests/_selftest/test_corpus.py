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
from caplet._selftest._model import HostileCase, Layer
from caplet._selftest._report import CaseStatus
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    root = tmp_path_factory.mktemp("selftest")
    with pytest.MonkeyPatch.context() as patch:
        # The module-scoped bench outlives each test's own HOME override.
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("XDG_STATE_HOME", str(root / "home" / ".state"))
        patch.setenv("XDG_CONFIG_HOME", str(root / "home" / ".config"))
        with Bench(CASES, root / "arena") as bench:
            # Every layer is in force on this machine; the optional pids
            # cgroup needs root (or a delegated cgroup) for the unprivileged run.
            assert set(bench.layers) == {"namespaces", "rlimits", "landlock", "seccomp", "cgroup"}
            missing = {layer for layer, why in bench.layers.items() if why}
            assert missing <= (set() if ROOT else {"cgroup"}), bench.layers
            yield bench


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_case_is_contained_by_its_layer(case: HostileCase, bench: Bench) -> None:
    result = bench.run(case)
    assert result.name == case.name
    if result.layer_missing:
        # Only the optional cgroup can be missing (see the fixture): another
        # layer must still have contained the attack, and it says so.
        assert case.layer is Layer.CGROUP
        assert result.status is CaseStatus.ELSEWHERE, result
        assert result.passed
        return
    assert result.status is CaseStatus.CONTAINED, (
        f"{case.name} ({case.attack}): expected {case.layer.value} to stop it; "
        f"{result.status.value}: {result.outcome} [{result.detail}]"
    )
    assert result.passed
