"""Syscall numbers and names: the tables agree with the kernel headers and libseccomp."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from caplet._sandbox._seccomp_numbers import (
    NEWEST_REVIEWED,
    SYSCALL_NUMBERS,
    denial_errno,
    syscall_names,
    syscall_number,
)

MACHINE = os.uname().machine


_HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


def _header_numbers(machine: str) -> dict[str, int]:
    header = _HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    return {
        match[1]: int(match[2])
        for match in re.finditer(
            r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text(encoding="ascii")
        )
    }


@pytest.mark.parametrize("machine", sorted(SYSCALL_NUMBERS))
def test_tables_agree_with_the_installed_kernel_headers(machine: str) -> None:
    defined = _header_numbers(machine)
    table = SYSCALL_NUMBERS[machine]
    checked = [name for name in table if name in defined]
    # The header may predate the newest calls, never the ones before Linux 5.1.
    assert all(name in defined for name, number in table.items() if number < 424)
    assert {name: table[name] for name in checked} == {name: defined[name] for name in checked}
    # libseccomp's names for the same numbers (so the bindings read the right table).
    names = syscall_names(machine)
    assert all(names[defined[name]] == name for name in checked)


def test_libseccomp_resolves_like_the_kernel_headers() -> None:
    defined = _header_numbers(MACHINE)
    mismatched = {
        name: (number, syscall_number(name))
        for name, number in defined.items()
        if syscall_number(name) not in (None, number)
    }
    assert mismatched == {}
    for name in ("read", "openat", "ioctl", "socketpair", "clone3", "fchmodat2", "file_setattr"):
        assert syscall_number(name) is not None, name
    assert syscall_number("no_such_call") is None


def test_syscall_names_cover_every_reviewed_number() -> None:
    names = syscall_names("x86_64")
    assert names[101] == "ptrace"
    assert names[41] == "socket"
    assert names[452] == "fchmodat2"
    assert names[469] == "file_setattr"  # newer than libseccomp 2.5's table
    assert all(names[number] == name for name, number in SYSCALL_NUMBERS["x86_64"].items())
    assert len(names) > 360  # 0..334 and 424..469, whatever libseccomp knows
    assert max(names) == NEWEST_REVIEWED
    assert syscall_names("aarch64")[63] == "read"
    assert syscall_names("riscv64") == {}


def test_refused_calls_get_eperm_and_newer_numbers_enosys() -> None:
    for number in (NEWEST_REVIEWED + 1, NEWEST_REVIEWED + 50, 1000):
        assert denial_errno(number) == errno.ENOSYS
    assert denial_errno(syscall_number("ptrace") or -1) == errno.EPERM
    assert denial_errno(syscall_number("setxattrat") or -1) == errno.EPERM
    assert denial_errno(0x40000000 | 39, "x86_64") == errno.EPERM  # x32
    if MACHINE == "x86_64":
        assert denial_errno(400) == errno.ENOSYS  # a gap in the x86_64 table: no call there
