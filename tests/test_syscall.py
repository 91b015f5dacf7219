"""The ctypes layer: capget/capset round trips on the real kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._syscall import (
    CAP_DAC_OVERRIDE,
    drop_effective_capabilities,
    effective_capabilities,
    raise_effective_capabilities,
)


def test_effective_capabilities_match_proc_status() -> None:
    text = Path("/proc/thread-self/status").read_text(encoding="ascii")
    (line,) = [line for line in text.splitlines() if line.startswith("CapEff:")]
    mask = int(line.split()[1], 16)
    assert effective_capabilities() == frozenset(b for b in range(64) if mask >> b & 1)


def test_drop_and_raise_round_trip() -> None:
    if CAP_DAC_OVERRIDE not in effective_capabilities():
        # Unprivileged: raising a capability we were never permitted must fail with EPERM.
        with pytest.raises(OSError, match="capset") as info:
            raise_effective_capabilities([CAP_DAC_OVERRIDE])
        assert info.value.errno == 1
        return
    drop_effective_capabilities([CAP_DAC_OVERRIDE])
    try:
        assert CAP_DAC_OVERRIDE not in effective_capabilities()
    finally:
        raise_effective_capabilities([CAP_DAC_OVERRIDE])
    assert CAP_DAC_OVERRIDE in effective_capabilities()
    assert os.geteuid() == 0
