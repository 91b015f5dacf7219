"""What a lookup by a computed name hides (CPL-THR-003): the APIs and modules worth
hiding, and builtins' namespaces. Split out of :mod:`caplet._scan._sink_lookups`, whose
checks and :mod:`caplet._scan._sink_namespaces`' ask it.
"""

from __future__ import annotations

from caplet._scan._rules import API_RULES, MODULE_RULES
from caplet._scan._sources import (
    DECODERS,
    DNS_FUNCTIONS,
    EXECUTORS,
    PIP_MAINS,
    RECON_FUNCTIONS,
    RUNS_FILE,
)

__all__ = ["BUILTIN_OWNERS", "HIDDEN_RUNNER_NAMES", "hides_name", "worth_hiding"]


#: Builtins' namespaces: a lookup in one by a computed name hides what is called.
BUILTIN_OWNERS = frozenset({"builtins", "builtins.__dict__"})


#: The names of code and process runners (os, subprocess, pty, builtins) that a lookup on
#: an owner the resolver cannot name still hides when they are spelled in pieces
#: (``getattr(import_module(name[::-1]), "Po" + "pen")``, blind33). ``run``, ``call`` and
#: ``compile`` are every library's method names, left out.
HIDDEN_RUNNER_NAMES = frozenset(
    {
        "system",
        "popen",
        "Popen",
        "check_output",
        "check_call",
        "getoutput",
        "getstatusoutput",
        "startfile",
        "posix_spawn",
        "posix_spawnp",
        "spawnv",
        "spawnve",
        "spawnl",
        "spawnle",
        "execv",
        "execve",
        "execvp",
        "execl",
        "exec",
        "eval",
        "__import__",
    }
)


#: Modules whose names and functions are worth hiding besides those with rules of their
#: own: decoders, the host's identity, the registry, pip.
_HIDDEN_ROOTS = frozenset(
    {
        "os",
        "builtins",
        "sys",
        "marshal",
        "base64",
        "binascii",
        "zlib",
        "lzma",
        "bz2",
        "codecs",
        "pip",
        "platform",
        "getpass",
        "winreg",
        "_winreg",
        "urllib",
        "http",
    }
)


#: Modules the rule tables name only for harmless reasons (logging handlers, type objects).
_NOT_HIDDEN_ROOTS = frozenset({"logging", "gc", "inspect", "types", "distutils", "code"})


_SENSITIVE_ROOTS = (
    _HIDDEN_ROOTS
    | {m.split(".", 1)[0] for m in MODULE_RULES}
    | {a.split(".", 1)[0] for a in API_RULES}
) - _NOT_HIDDEN_ROOTS


def worth_hiding(api: str) -> bool:
    """An API a computed lookup hides: one with a rule, or one the data flow watches
    (code runners, files run, decoders, the host's identity, name resolution, pip)."""
    return (
        api in API_RULES
        or api in EXECUTORS
        or api in RUNS_FILE
        or api in DECODERS
        or api in RECON_FUNCTIONS
        or api in DNS_FUNCTIONS
        or api in PIP_MAINS
    )


def hides_name(name: str) -> bool:
    """True when ``name`` (a module or attribute built from pieces) is worth hiding: a
    module the rules watch (processes, network, native code, code loading, files) or
    one of :data:`_HIDDEN_ROOTS`, or anything in one."""
    return name in MODULE_RULES or name.split(".", 1)[0] in _SENSITIVE_ROOTS
