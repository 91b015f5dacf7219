"""What a ``proc.exec`` program brings with it, shown to the approver and pinned.

A program is run through the interpreter its ``#!`` line names (a script)
and the loader its ELF header names, and enable binds each of them into the
jail, executable (:func:`caplet._sandbox._programs.program_chain`): the
plugin may run ``/usr/bin/python3`` itself once ``proc.exec:mytool`` is
granted, when ``mytool`` is a Python script. Red team round 19: none of
that was shown, so a person approving ``proc.exec:mytool`` approved a
Python interpreter unseen, and a script whose ``#!`` line changed after the
approval (or a name ``PATH`` now finds elsewhere) brought another program
under the same approval.

So each program's files are one line (``proc.exec:mytool: /opt/t/mytool,
a script for /usr/bin/python3, loaded by /lib64/ld-linux-x86-64.so.2``):
shown before consent and approval, recorded in the approval
(``ApprovalRecord.programs``) and compared at every enable, where a line
that differs from the approved one is a widening needing fresh consent, as
a new capability is. These are host state, not content, resolved on this
host's ``PATH``: an approval recorded on another host (a shared store) or
before caplet kept them (``None``) compares nothing that is missing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from caplet._capabilities._model import Capability, ProcExecCapability
from caplet._errors import SandboxError
from caplet._host._defaults import by_default
from caplet._manifest._model import Manifest
from caplet._sandbox._programs import program_chain

__all__ = [
    "default_program_reach",
    "program_changes",
    "program_reach",
    "reach_line",
    "update_changes",
]

#: What a line says when the program was not found where the approval was given.
_NOT_FOUND = "not found on this host"


def reach_line(capability: ProcExecCapability, described: str) -> str:
    """The line of one program: its capability, then the files it brings."""
    return f"{capability.declared}: {described}"


def program_reach(capabilities: Sequence[Capability]) -> tuple[str, ...]:
    """One line per ``proc.exec`` capability: the files it brings on this host.

    Resolved as enable resolves them (the host's ``PATH``, its absolute
    entries). A program that cannot be resolved here (not installed yet, a
    ``#!`` line enable would refuse) gets a line saying so: enable refuses
    it with the reason, and once it resolves its line differs, so the
    person is shown what it brings before it runs.
    """
    lines = []
    for capability in capabilities:
        if not isinstance(capability, ProcExecCapability):
            continue
        try:
            chain = program_chain(capability.program, search_path=os.environ.get("PATH"))
        except SandboxError:
            lines.append(reach_line(capability, _NOT_FOUND))
            continue
        lines.append(reach_line(capability, chain.describe()))
    return tuple(lines)


def default_program_reach(manifest: Manifest) -> tuple[str, ...]:
    """:func:`program_reach` of *manifest*'s programs, a templated one
    (``proc.exec:${config.tool}``) resolved with its default: what an approval vouches
    for, as it records the default itself, and what an enable that sets nothing runs
    (attack22: resolved as declared, the template was "not found on this host" to the
    approver and the approval, and every enable of the approved plugin asked again).
    A template without a default stays "not found": nothing runs until it is set, and
    the operator's value is compared at that enable."""
    return program_reach(by_default(manifest))


def program_changes(
    approved: Sequence[str] | None, now: Sequence[str], *, was_label: str = "approved"
) -> tuple[str, ...]:
    """How the programs' files ``now`` differ from the ``approved`` lines, one sentence each
    (``was_label`` names what the earlier lines were: "approved", or "shown").

    ``approved`` None: an approval recorded before caplet kept them, which
    is compared with nothing. A capability the approval has no line for
    (one it did not grant) is judged as a capability, not here.
    """
    if approved is None:
        return ()
    before = {_declared(line): line for line in approved}
    changes = []
    for line in now:
        declared = _declared(line)
        was = before.get(declared)
        if was is None or was == line:
            continue
        changes.append(
            f"{declared} now runs {_files(line)}; {was_label}: {_files(was)} (its #! line, "
            "its links or PATH changed since)"
        )
    return tuple(changes)


def update_changes(approved: Sequence[str] | None, now: Sequence[str]) -> tuple[str, ...]:
    """What ``caplet update``'s question shows of the programs ``now`` (this host's lines,
    resolved before it is asked) against the ``approved`` lines: each changed line as
    :func:`program_changes` says it, and what each program the approval has no line for
    brings (attack22: the question named the capability only, and the approval then
    pinned the files the program brought when the answer came, unseen).

    ``approved`` None (an approval older than the record, or none): nothing, as the
    update then pins nothing either.
    """
    if approved is None:
        return ()
    known = {_declared(line) for line in approved}
    added = tuple(
        f"{_declared(line)} is {_NOT_FOUND}"
        if _files(line) == _NOT_FOUND
        else f"{_declared(line)} brings {_files(line)}"
        for line in now
        if _declared(line) not in known
    )
    return program_changes(approved, now) + added


def _declared(line: str) -> str:
    # A declared proc.exec capability holds no whitespace (_parse_proc): the first ": "
    # after it ends it.
    return line.partition(": ")[0]


def _files(line: str) -> str:
    return line.partition(": ")[2]
