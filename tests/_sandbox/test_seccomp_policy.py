"""The allowlist as data: consistent, every name real, the argument rules exact."""

from __future__ import annotations

from caplet._sandbox._seccomp_numbers import AUDIT_ARCH, UNIFIED_NUMBERS, syscall_number
from caplet._sandbox._seccomp_policy import (
    ALLOWED,
    CONDITIONAL,
    EXEC,
    NEVER_ALLOWED,
    QUIET_REFUSALS,
    WITH_EXEC,
    WITHOUT_EXEC,
    allowlist_names,
)
from caplet._sandbox._seccomp_rules import (
    Masked,
    Rule,
)


def _holds(rules: tuple[Rule, ...], args: dict[int, int]) -> bool:
    return any(all(args.get(c.arg, 0) & c.mask == c.value for c in rule) for rule in rules)


def test_no_call_is_listed_twice_or_both_allowed_and_never_allowed() -> None:
    grouped = [name for group in ALLOWED for name in group.syscalls]
    assert len(grouped) == len(set(grouped))
    conditional = [c.syscall for c in CONDITIONAL]
    assert len(conditional) == len(set(conditional))
    assert not set(grouped) & set(conditional)
    assert not set(WITHOUT_EXEC.syscalls) & {*grouped, *conditional}
    assert not set(WITHOUT_EXEC.syscalls) & allowlist_names(allow_exec=True)
    assert not set(WITHOUT_EXEC.syscalls) & allowlist_names(allow_exec=False)
    assert not set(EXEC) & allowlist_names(allow_exec=False)
    assert not set(WITH_EXEC.syscalls) & allowlist_names(allow_exec=False)
    assert not set(WITH_EXEC.syscalls) & {*grouped, *conditional}
    assert not set(NEVER_ALLOWED) & allowlist_names(allow_exec=True)
    assert not {q.syscall for q in QUIET_REFUSALS} & allowlist_names(allow_exec=True)
    assert len(NEVER_ALLOWED) == len(set(NEVER_ALLOWED))
    assert all(group.why and group.syscalls for group in ALLOWED)
    assert all(c.why and c.rules for c in CONDITIONAL)
    assert all(q.why for q in QUIET_REFUSALS)


def test_every_name_is_a_real_system_call() -> None:
    # A misspelt name would silently be missing from every program.
    unknown = [
        name
        for name in sorted(
            allowlist_names(allow_exec=True)
            | set(NEVER_ALLOWED)
            | {q.syscall for q in QUIET_REFUSALS}
        )
        if all(syscall_number(name, machine) is None for machine in AUDIT_ARCH)
    ]
    assert unknown == []


def test_arm64_lacks_only_the_legacy_calls() -> None:
    missing = {
        name for name in allowlist_names(allow_exec=True) if syscall_number(name, "aarch64") is None
    }
    # asm-generic never had these; glibc uses the *at / p* / epoll_pwait forms.
    legacy = (
        "open creat mkdir mknod chmod access stat lstat rename link unlink rmdir symlink "
        "readlink pipe dup2 poll select fork vfork alarm pause time getdents epoll_create "
        "epoll_wait inotify_init eventfd signalfd utime utimes futimesat getpgrp arch_prctl "
        "getrlimit setrlimit"
    )
    assert missing <= set(legacy.split()), missing


def test_the_allowlist_has_the_expected_size() -> None:
    # A jump here means someone added or removed calls: review the diff.
    assert 200 <= len(allowlist_names(allow_exec=False)) <= 230
    # execve, execveat, the epoll instances and inotify (WITH_EXEC, attack37); memfd_create
    # in neither (WITHOUT_EXEC, memfd29).
    assert len(allowlist_names(allow_exec=True)) == len(allowlist_names(allow_exec=False)) + 8


def test_unified_numbers_are_consecutive_from_linux_5_1() -> None:
    assert sorted(UNIFIED_NUMBERS.values()) == list(range(424, 424 + len(UNIFIED_NUMBERS)))


def test_setid_modes_and_device_types() -> None:
    rules = {c.syscall: c.rules for c in CONDITIONAL}
    for mode in (0o644, 0o755, 0o1770, 0o775, 0o0):
        assert _holds(rules["fchmodat"], {2: mode})
    # A changed mode others may write is refused too (attack31); a created one is not,
    # since every open() passes 0o666 and the umask clears it.
    for mode in (0o4755, 0o2755, 0o6777, 0x1_0000 | 0o4000, 0o1777, 0o666, 0o002):
        assert not _holds(rules["fchmodat"], {2: mode})
    assert _holds(rules["openat"], {3: 0o666})
    assert _holds(rules["mknodat"], {2: 0o010600})
    assert not _holds(rules["mknodat"], {2: 0o020600})
    assert not _holds(rules["mknodat"], {2: 0o060600})
    assert rules["sendto"] == ((Masked(4, 0xFFFF_FFFF_FFFF_FFFF, 0),),)
