"""Typed capability objects: the parsed form of the lexicon in design.md section 3.

Each class keeps the string it was declared as (``declared``) and renders its
normalised form with ``str()``. A capability whose text references
configuration (``fs.read:${config.root}``) is *templated* until
:func:`caplet._capabilities._parse.substitute` resolves it; a templated
capability grants nothing. ``declared`` is excluded from equality and hashing
so that two spellings of one grant (``fs.read:/data/`` and ``fs.read:/data``)
compare equal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "GLOB_CHARS",
    "GLOB_REACH",
    "AppCapability",
    "Capability",
    "CapabilityKind",
    "EnvReadCapability",
    "FsCapability",
    "HostCallCapability",
    "NetHttpCapability",
    "ProcExecCapability",
    "glob_folder",
    "glob_reach",
    "glob_reaches",
    "glob_words",
]

#: The characters that make an fs path a glob.
GLOB_CHARS = frozenset("*?[")
#: How a glob is granted, said wherever a person consents to one (steer31, glob32).
GLOB_REACH = (
    "each file it matches when the plugin is enabled is granted by itself; files added "
    "later are not seen until it is enabled again; a link, a folder or a file with another "
    "name (a hard link) is left out"
)


class CapabilityKind(enum.Enum):
    """The prefix before the first ``:`` of a capability string."""

    FS_READ = "fs.read"
    FS_WRITE = "fs.write"
    NET_HTTP = "net.http"
    ENV_READ = "env.read"
    PROC_EXEC = "proc.exec"
    HOST_CALL = "host.call"
    APP = "app"


@dataclass(frozen=True, slots=True)
class FsCapability:
    """``fs.read:<path or glob>`` / ``fs.write:<path or glob>``.

    ``path`` is absolute and normalised (no ``..``, no trailing slash) once
    substituted; ``is_glob`` is true when it contains ``*``, ``?`` or ``[``.
    """

    kind: CapabilityKind
    path: str
    declared: str = field(compare=False)
    templated: bool = False
    is_glob: bool = False

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.path}"

    @property
    def root(self) -> str:
        """The directory a glob starts in (the path itself when it is no glob).

        The scanner uses it as the prefix a literal path must lie under; the kernel
        layers grant a glob as the files it matches at enable, each by itself
        (:mod:`caplet._host._glob_grants`, glob32).
        """
        return glob_folder(self.path) or self.path


@dataclass(frozen=True, slots=True)
class NetHttpCapability:
    """``net.http:<scheme>://<host>[:port][/path-prefix]``.

    ``host`` is lower-case ASCII without a trailing dot; ``wildcard`` means
    ``*.host`` (subdomains of ``host``, not ``host`` itself). ``port`` is
    always explicit (the scheme default when not written).
    """

    scheme: str
    host: str
    port: int
    path_prefix: str
    declared: str = field(compare=False)
    wildcard: bool = False
    templated: bool = False

    @property
    def kind(self) -> CapabilityKind:
        return CapabilityKind.NET_HTTP

    def __str__(self) -> str:
        if self.templated:
            # A templated URL has no parsed origin yet (scheme, host and port
            # may all come from configuration): show it as written.
            return self.declared
        host = f"*.{self.host}" if self.wildcard else self.host
        default_port = {"http": 80, "https": 443}[self.scheme]
        port = "" if self.port == default_port else f":{self.port}"
        return f"net.http:{self.scheme}://{host}{port}{self.path_prefix}"


@dataclass(frozen=True, slots=True)
class EnvReadCapability:
    """``env.read:<NAME>``: exactly one environment variable."""

    name: str
    declared: str = field(compare=False)
    templated: bool = False

    @property
    def kind(self) -> CapabilityKind:
        return CapabilityKind.ENV_READ

    def __str__(self) -> str:
        return f"env.read:{self.name}"


@dataclass(frozen=True, slots=True)
class ProcExecCapability:
    """``proc.exec:<program>``: run that one program (a name or absolute path).

    ``is_shell_or_interpreter`` marks programs that can run arbitrary code
    (sh, bash, python, node, env, sudo ...): granting one grants everything.
    """

    program: str
    declared: str = field(compare=False)
    templated: bool = False
    is_shell_or_interpreter: bool = False

    @property
    def kind(self) -> CapabilityKind:
        return CapabilityKind.PROC_EXEC

    def __str__(self) -> str:
        return f"proc.exec:{self.program}"


@dataclass(frozen=True, slots=True)
class HostCallCapability:
    """``host.call:<module>``: call another plugin's module (listed in ``requires``)."""

    module: str
    declared: str = field(compare=False)
    templated: bool = False

    @property
    def kind(self) -> CapabilityKind:
        return CapabilityKind.HOST_CALL

    def __str__(self) -> str:
        return f"host.call:{self.module}"


@dataclass(frozen=True, slots=True)
class AppCapability:
    """``app:<name>``: a capability the embedding application defines and brokers."""

    name: str
    declared: str = field(compare=False)
    templated: bool = False

    @property
    def kind(self) -> CapabilityKind:
        return CapabilityKind.APP

    def __str__(self) -> str:
        return f"app:{self.name}"


Capability = (
    FsCapability
    | NetHttpCapability
    | EnvReadCapability
    | ProcExecCapability
    | HostCallCapability
    | AppCapability
)


def glob_folder(path: str) -> str | None:
    """The folder a glob path is granted as (None when ``path`` holds no glob character).

    ``/srv/reports/*.csv`` is ``/srv/reports``, ``/srv/*/reports`` is ``/srv``: the
    directory above the first component that holds ``*``, ``?`` or ``[``.
    """
    cut = min((i for i, c in enumerate(path) if c in "*?["), default=-1)
    if cut < 0:
        return None
    return path[:cut].rsplit("/", 1)[0] or "/"


def glob_words(kind: CapabilityKind, folder: str) -> str:
    """What a glob of ``kind`` starting in ``folder`` reaches, in words (glob32).

    A write glob writes the files it matches in place and makes no new name: the
    kernel layers cannot hold a name created later to the pattern (Landlock and
    mounts rule files and folders, not names), so the safe answer is no creation.
    """
    if kind is CapabilityKind.FS_WRITE:
        return (
            f"only the files of {folder} it matches, written in place: it creates, renames "
            "and deletes no file (grant the folder to create files)"
        )
    return f"only the files of {folder} it matches, read-only"


def glob_reach(capability: Capability) -> str | None:
    """What a resolved ``fs.read``/``fs.write`` glob reaches, in words; None for any
    other capability.

    A consent screen that shows ``fs.read:/srv/reports/*.csv`` alone says nothing of
    when it is matched, what it leaves out or whether a write glob creates files: every
    place a person consents to a glob says it (steer31, glob32).
    """
    if not isinstance(capability, FsCapability) or capability.templated:
        return None
    folder = glob_folder(capability.path)
    return None if folder is None else glob_words(capability.kind, folder)


def glob_reaches(capabilities: tuple[Capability, ...] | list[Capability]) -> tuple[str, ...]:
    """``CAPABILITY -> what it reaches`` for each resolved fs glob among ``capabilities``:
    what :class:`~caplet._host._consent.ConsentRequest` and the JSON documents carry, so a
    program deciding on a grant reads what a person reads (steer31's residual, glob32)."""
    return tuple(
        f"{capability} -> {reach}"
        for capability in capabilities
        if (reach := glob_reach(capability)) is not None
    )
