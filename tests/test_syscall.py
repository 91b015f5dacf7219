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


def test_libseccomp_compiles_a_program_and_reports_its_errors() -> None:
    from caplet._syscall import (
        SCMP_ACT_ALLOW,
        SCMP_ARCH_X86_64,
        SCMP_CMP_MASKED_EQ,
        SCMP_FLTATR_CTL_OPTIMIZE,
        SeccompCompiler,
        libseccomp_native_arch,
        libseccomp_syscall_name,
        libseccomp_syscall_number,
        libseccomp_version,
        scmp_act_errno,
    )

    assert libseccomp_version() >= (2, 5, 0)
    native = libseccomp_native_arch()
    read = libseccomp_syscall_number(native, "read")
    assert read is not None
    assert libseccomp_syscall_name(native, read) == "read"
    assert libseccomp_syscall_number(native, "no_such_call") is None
    assert libseccomp_syscall_number(SCMP_ARCH_X86_64, "open") == 2
    deny = scmp_act_errno(1)
    with SeccompCompiler(deny) as compiler:
        compiler.set_attribute(SCMP_FLTATR_CTL_OPTIMIZE, 2)
        compiler.add_rule(SCMP_ACT_ALLOW, read)
        compiler.add_rule(SCMP_ACT_ALLOW, read + 1, [(0, SCMP_CMP_MASKED_EQ, 0xFF, 1)])
        # libseccomp refuses a rule whose action is the default one (-EACCES).
        with pytest.raises(OSError, match="seccomp_rule_add") as refused:
            compiler.add_rule(deny, read + 2)
        assert refused.value.errno == 13
        program = compiler.export()
    assert program
    assert len(program) % 8 == 0
    with pytest.raises(ValueError, match="released"):
        compiler.export()
