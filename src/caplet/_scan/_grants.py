"""What a plugin's declared capabilities cover, reduced to what the scanner's rules ask.

The scanner lowers a finding to its rule's covered severity when a declared
(and already substituted) capability covers the behaviour; :class:`Grants`
answers those questions (may it run this program, write files, reach this
host, read this path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import assert_never

from caplet._capabilities._model import (
    AppCapability,
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)

__all__ = ["NO_GRANTS", "Grants"]


@dataclass(frozen=True, slots=True)
class Grants:
    """What the declared capabilities cover, reduced to what the rules ask.

    A templated capability (``fs.read:${config.root}``) covers its *kind*
    (the plugin did declare that it reads files) but no literal path or
    program, because its value is only known once configured; the sandbox
    enforces the substituted value.
    """

    fs_read: tuple[str, ...]
    fs_write: tuple[str, ...]
    env_names: frozenset[str]
    programs: tuple[str, ...]
    templated_kinds: frozenset[CapabilityKind] = frozenset()
    net: tuple[NetHttpCapability, ...] = ()

    @property
    def writes_files(self) -> bool:
        return bool(self.fs_write) or CapabilityKind.FS_WRITE in self.templated_kinds

    @property
    def reads_files(self) -> bool:
        return (
            self.writes_files
            or bool(self.fs_read)
            or CapabilityKind.FS_READ in self.templated_kinds
        )

    @property
    def dangerous(self) -> str | None:
        """A declared capability that can do real harm (what CPL-AUD-001 escalates on)."""
        kinds = {
            CapabilityKind.PROC_EXEC: bool(self.programs),
            CapabilityKind.NET_HTTP: bool(self.net),
            CapabilityKind.FS_WRITE: bool(self.fs_write),
            CapabilityKind.ENV_READ: bool(self.env_names),
        }
        for kind, declared in kinds.items():
            if declared or kind in self.templated_kinds:
                return kind.value
        return None

    @property
    def runs_programs(self) -> bool:
        return bool(self.programs) or CapabilityKind.PROC_EXEC in self.templated_kinds

    @classmethod
    def of(cls, capabilities: Sequence[Capability]) -> Grants:
        fs_read: list[str] = []
        fs_write: list[str] = []
        env_names: set[str] = set()
        programs: list[str] = []
        templated: set[CapabilityKind] = set()
        net: list[NetHttpCapability] = []
        for cap in capabilities:
            if cap.templated:
                templated.add(cap.kind)
                continue
            if isinstance(cap, FsCapability):
                target = fs_write if cap.kind is CapabilityKind.FS_WRITE else fs_read
                target.append(cap.root)
            elif isinstance(cap, EnvReadCapability):
                env_names.add(cap.name)
            elif isinstance(cap, ProcExecCapability):
                programs.append(cap.program)
            elif isinstance(cap, NetHttpCapability):
                net.append(cap)
            elif isinstance(cap, HostCallCapability | AppCapability):
                pass  # brokered by the host: no scanner rule is about them
            else:
                assert_never(cap)
        return cls(
            tuple(fs_read),
            tuple(fs_write),
            frozenset(env_names),
            tuple(programs),
            frozenset(templated),
            tuple(net),
        )

    def covers_program(self, program: str | None) -> bool:
        """A literal program must be granted by name; an unknown one by any grant."""
        if program is None:
            return self.runs_programs
        name = PurePosixPath(program).name
        return any(
            granted in (program, name) or PurePosixPath(granted).name == program
            for granted in self.programs
        )

    def covers_host(self, host: str) -> bool:
        """True when a net.http capability names ``host`` (exactly, or by ``*.suffix``)."""
        host = host.lower().rstrip(".")
        for cap in self.net:
            if cap.wildcard:
                if host.endswith("." + cap.host):
                    return True
            elif host == cap.host:
                return True
        return any(CapabilityKind.NET_HTTP is k for k in self.templated_kinds)

    def covers_path(self, literal: str) -> bool:
        """True when some fs capability's path is a prefix of ``literal``."""
        for prefix in (*self.fs_read, *self.fs_write):
            base = prefix.rstrip("/")
            if literal == prefix or literal.startswith(base + "/"):
                return True
        return False


NO_GRANTS = Grants((), (), frozenset(), ())
