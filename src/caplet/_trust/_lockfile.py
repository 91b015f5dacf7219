"""``caplet.lock``: the plugins a project allows to run, pinned to their exact content.

Seed 001 makes integrity and consent the load-bearing controls: a plugin runs
only with an entry in the lock file whose digest equals the plugin's content
hash, and only with the capabilities that entry approves. The file belongs
in the repository next to the code, so it is TOML (human-diffable, reviewed
like code), read with :mod:`tomllib`, written with ``tomli-w`` in a
deterministic order (plugins by name, keys in a fixed order, capabilities
sorted) so that re-locking unchanged plugins changes nothing but
``approved_at``, and replaced atomically (:mod:`caplet._atomic`), so
a crash mid-write leaves the old or the new file, never a torn one.

Reading is strict and fails closed: an unknown key, a wrong type, a digest
that is not ``sha256-`` and 64 hex digits, or a newer format version is an
error naming the lock file, the plugin entry and the field, and what to do.

Layout (one table per plugin under ``plugins``)::

    version = 1

    [plugins.hello]
    version = "1.0.0"
    source = "directory"            # or "distribution" (then: distribution = "name")
    digest = "sha256-<hex>"         # caplet's canonical tree hash
    capabilities = []               # the approved subset of the declared ones
    risk_level = "LOW"
    verdict = "approve"
    audit_provider = "static-only"  # or the provider kind, with (steer35):
    # audit_model = "gpt-4o"                              the model whose audit it was
    # audit_endpoint = "https://api.openai.com:443/v1"    the server that model answered from
    approved_at = 2026-07-01T12:00:00Z

    [plugins.hello.signature]       # optional: the publisher key that must sign it
    key_id = "9A1B..."
    public_key = "RWS..."
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import os
import re
import stat
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import tomli_w

from caplet._atomic import atomic_write
from caplet._audit._model import Verdict, reviewer
from caplet._errors import LockfileError, LockfileWriteError
from caplet._findings import RiskLevel
from caplet._toml import TomlLimitError, parse_toml
from caplet._trust._hashing import is_tree_hash
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._source import SourceKind

__all__ = [
    "LOCKFILE_NAME",
    "LOCK_FORMAT_VERSION",
    "LockEntry",
    "LockSignature",
    "Lockfile",
    "check_lockfile",
    "read_lockfile",
    "render_lockfile",
    "update_lockfile",
    "write_lockfile",
]

LOCKFILE_NAME = "caplet.lock"
LOCK_FORMAT_VERSION = 1

_HEADER = (
    "# caplet.lock: the plugins this project allows to run, pinned to their exact content.\n"
    "# Written by `caplet lock`; review changes like code and commit it. "
    "`caplet verify` checks it.\n"
)

_NAME_RE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_KEY_ID_RE = re.compile(r"[0-9A-F]{16}")
_ENTRY_KEYS = (
    "version",
    "source",
    "distribution",
    "digest",
    "capabilities",
    "risk_level",
    "verdict",
    "audit_provider",
    "audit_model",
    "audit_endpoint",
    "approved_at",
    "signature",
)
_SIGNATURE_KEYS = ("key_id", "public_key")
#: A lock file larger than this is refused unread: it cannot be a real one.
_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LockSignature:
    """The publisher key whose valid signature the plugin must carry (minisign format)."""

    key_id: str
    public_key: str


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One pinned plugin: this content (``digest``) with these capabilities.

    ``capabilities`` holds capability strings as declared in the manifest;
    they are compared by meaning, so ``fs.read:/data/`` pins ``fs.read:/data``.
    ``approved_at`` is timezone-aware UTC, whole seconds. ``audit_model`` and
    ``audit_endpoint`` name the model and the server (its API root) of a model's audit
    (steer35); an entry written before them has neither (``""``), and its review is then
    not known: it vouches for no later version's review (:attr:`review`).
    """

    name: str
    version: str
    source: SourceKind
    digest: str
    capabilities: tuple[str, ...]
    risk_level: RiskLevel
    verdict: Verdict
    audit_provider: str
    approved_at: dt.datetime
    distribution: str | None = None
    signature: LockSignature | None = None
    audit_model: str = ""
    audit_endpoint: str = ""

    @property
    def review(self) -> str | None:
        """What reviewed the pinned content, as an approval records it (steer35):
        ``static-only``, ``provider:model at <api root>``, or None when the entry does not
        say which model at which server (an entry written before they were recorded)."""
        if self.audit_provider == "static-only":
            return "static-only"
        if not self.audit_model or not self.audit_endpoint:
            return None
        return reviewer(self.audit_provider, self.audit_model, self.audit_endpoint)


@dataclass(frozen=True, slots=True)
class Lockfile:
    """The whole lock file: its path and its entries, sorted by plugin name."""

    path: Path
    entries: tuple[LockEntry, ...] = ()

    def entry(self, name: str) -> LockEntry | None:
        """The entry of plugin *name*, if the lock has one."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.entries)

    def with_entry(self, entry: LockEntry) -> Lockfile:
        """A copy with *entry* added or replacing the entry of the same name."""
        kept = [e for e in self.entries if e.name != entry.name]
        return replace(self, entries=tuple(sorted([*kept, entry], key=lambda e: e.name)))

    def without(self, name: str) -> Lockfile:
        """A copy without the entry of *name* (unchanged when there is none)."""
        return replace(self, entries=tuple(e for e in self.entries if e.name != name))


# -- reading ------------------------------------------------------------------------------


class _Reader:
    """Validates the parsed TOML of one lock file; every error names path, entry and field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, problem: str, *, plugin: str | None = None, field: str | None = None) -> Any:
        where = f"lock file {self.path}"
        if plugin is not None:
            where += f", plugin {plugin!r}"
        if field is not None:
            where += f", field {field!r}"
        fix = (
            f"re-pin it with `caplet lock {plugin}`"
            if plugin is not None
            else "fix it by hand or delete it and re-pin with `caplet lock`"
        )
        return LockfileError(
            f"{where}: {problem}; {fix}", path=str(self.path), plugin=plugin, field=field
        )

    def string(self, table: Mapping[str, object], key: str, plugin: str) -> str:
        value = table.get(key)
        if not isinstance(value, str) or not value:
            raise self.error(
                f"expected a non-empty string, got {_describe(value)}", plugin=plugin, field=key
            )
        return value

    def optional(self, table: Mapping[str, object], key: str, plugin: str) -> str:
        """A key an older entry may lack (``""``: absent, so not known)."""
        if key not in table:
            return ""
        return self.string(table, key, plugin)

    def entry(self, name: str, table: object) -> LockEntry:
        if not _NAME_RE.fullmatch(name):
            raise self.error(
                f"{name!r} is not a plugin name (kebab-case)", plugin=name, field="plugins"
            )
        if not isinstance(table, dict):
            raise self.error(f"expected a table, got {_describe(table)}", plugin=name)
        unknown = sorted(set(table) - set(_ENTRY_KEYS))
        if unknown:
            raise self.error(
                f"unknown key(s) {', '.join(unknown)}; expected only {', '.join(_ENTRY_KEYS)}",
                plugin=name,
                field=unknown[0],
            )
        digest = self.string(table, "digest", name)
        if not is_tree_hash(digest):
            raise self.error(
                f"expected 'sha256-' followed by 64 lower-case hex digits, got {digest!r}",
                plugin=name,
                field="digest",
            )
        source_text = self.string(table, "source", name)
        try:
            source = SourceKind(source_text)
        except ValueError:
            choices = ", ".join(k.value for k in SourceKind)
            raise self.error(
                f"unknown source {source_text!r}; expected one of {choices}",
                plugin=name,
                field="source",
            ) from None
        distribution = table.get("distribution")
        if source is SourceKind.DISTRIBUTION:
            distribution = self.string(table, "distribution", name)
        elif distribution is not None:
            raise self.error(
                "only a plugin with source = 'distribution' names a distribution",
                plugin=name,
                field="distribution",
            )
        capabilities = table.get("capabilities")
        if not isinstance(capabilities, list) or not all(
            isinstance(c, str) and c for c in capabilities
        ):
            raise self.error(
                f"expected a list of capability strings, got {_describe(capabilities)}",
                plugin=name,
                field="capabilities",
            )
        if len(set(capabilities)) != len(capabilities):
            raise self.error("lists a capability twice", plugin=name, field="capabilities")
        risk_text = self.string(table, "risk_level", name)
        try:
            risk = RiskLevel(risk_text)
        except ValueError:
            choices = ", ".join(r.value for r in RiskLevel)
            raise self.error(
                f"unknown risk level {risk_text!r}; expected one of {choices}",
                plugin=name,
                field="risk_level",
            ) from None
        verdict_text = self.string(table, "verdict", name)
        try:
            verdict = Verdict(verdict_text)
        except ValueError:
            choices = ", ".join(v.value for v in Verdict)
            raise self.error(
                f"unknown verdict {verdict_text!r}; expected one of {choices}",
                plugin=name,
                field="verdict",
            ) from None
        approved_at = table.get("approved_at")
        if not isinstance(approved_at, dt.datetime) or approved_at.tzinfo is None:
            raise self.error(
                "expected an offset date-time such as 2026-07-01T12:00:00Z, got "
                f"{_describe(approved_at)}",
                plugin=name,
                field="approved_at",
            )
        return LockEntry(
            name=name,
            version=self.string(table, "version", name),
            source=source,
            distribution=distribution,
            digest=digest,
            capabilities=tuple(capabilities),
            risk_level=risk,
            verdict=verdict,
            audit_provider=self.string(table, "audit_provider", name),
            audit_model=self.optional(table, "audit_model", name),
            audit_endpoint=self.optional(table, "audit_endpoint", name),
            approved_at=approved_at.astimezone(dt.UTC),
            signature=self.signature(name, table.get("signature")),
        )

    def signature(self, name: str, table: object) -> LockSignature | None:
        if table is None:
            return None
        if not isinstance(table, dict):
            raise self.error(
                f"expected a table, got {_describe(table)}", plugin=name, field="signature"
            )
        unknown = sorted(set(table) - set(_SIGNATURE_KEYS))
        if unknown:
            raise self.error(
                f"unknown key(s) {', '.join(unknown)} in the signature table; expected "
                f"only {', '.join(_SIGNATURE_KEYS)}",
                plugin=name,
                field=f"signature.{unknown[0]}",
            )
        key_id = table.get("key_id")
        if not isinstance(key_id, str) or not _KEY_ID_RE.fullmatch(key_id):
            raise self.error(
                f"expected 16 upper-case hex digits, got {_describe(key_id)}",
                plugin=name,
                field="signature.key_id",
            )
        public_key = table.get("public_key")
        if not isinstance(public_key, str) or not public_key:
            raise self.error(
                f"expected a minisign public key, got {_describe(public_key)}",
                plugin=name,
                field="signature.public_key",
            )
        return LockSignature(key_id=key_id, public_key=public_key)

    def lockfile(self, data: Mapping[str, object]) -> Lockfile:
        unknown = sorted(set(data) - {"version", "plugins"})
        if unknown:
            raise self.error(
                f"unknown top-level key(s) {', '.join(unknown)}; expected version and plugins",
                field=unknown[0],
            )
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise self.error(
                f"expected the format version {LOCK_FORMAT_VERSION}, got {_describe(version)}",
                field="version",
            )
        if version > LOCK_FORMAT_VERSION:
            raise LockfileError(
                f"lock file {self.path} has format version {version}, newer than this caplet "
                f"understands ({LOCK_FORMAT_VERSION}); upgrade caplet",
                path=str(self.path),
                field="version",
            )
        if version < 1:
            raise self.error(f"format version {version} does not exist", field="version")
        plugins = data.get("plugins", {})
        if not isinstance(plugins, dict):
            raise self.error(f"expected a table, got {_describe(plugins)}", field="plugins")
        entries = [self.entry(name, table) for name, table in plugins.items()]
        return Lockfile(path=self.path, entries=tuple(sorted(entries, key=lambda e: e.name)))


def _describe(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def read_lockfile(path: Path, *, missing_ok: bool = False) -> Lockfile:
    """Read and validate the lock file at *path*.

    A missing file is an empty :class:`Lockfile` when *missing_ok*, else a
    :class:`LockfileError` that says how to create one.
    """
    reader = _Reader(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (red-team round 4:
        # every locked host hung); it is refused below, like any non-regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise LockfileError(
                    f"lock file {path}: not a regular file; move it aside and re-pin with "
                    "`caplet lock`, or name the lock file itself",
                    path=str(path),
                )
            raw = handle.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        if missing_ok:
            return Lockfile(path=path)
        raise LockfileError(
            f"lock file {path} does not exist; approve the plugins this project uses "
            "and pin them with `caplet lock`, then commit the file",
            path=str(path),
        ) from None
    except OSError as exc:
        raise LockfileError(
            f"lock file {path} cannot be read ({exc.strerror}); check its permissions",
            path=str(path),
        ) from exc
    if len(raw) > _MAX_BYTES:
        raise reader.error(f"larger than {_MAX_BYTES} bytes")
    try:
        data = parse_toml(raw.decode("utf-8"))
    except TomlLimitError as exc:
        raise reader.error(f"not a lock file caplet wrote ({exc})") from None
    except UnicodeDecodeError as exc:
        raise reader.error(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise reader.error(f"not valid TOML ({exc})") from exc
    return reader.lockfile(data)


# -- writing ----------------------------------------------------------------------------------


def _entry_table(entry: LockEntry) -> dict[str, Any]:
    table: dict[str, Any] = {
        "version": entry.version,
        "source": entry.source.value,
    }
    if entry.distribution is not None:
        table["distribution"] = entry.distribution
    table.update(
        {
            "digest": entry.digest,
            "capabilities": sorted(entry.capabilities),
            "risk_level": entry.risk_level.value,
            "verdict": entry.verdict.value,
            "audit_provider": entry.audit_provider,
            **({"audit_model": entry.audit_model} if entry.audit_model else {}),
            **({"audit_endpoint": entry.audit_endpoint} if entry.audit_endpoint else {}),
            "approved_at": entry.approved_at.astimezone(dt.UTC).replace(microsecond=0),
        }
    )
    if entry.signature is not None:
        table["signature"] = {
            "key_id": entry.signature.key_id,
            "public_key": entry.signature.public_key,
        }
    return table


def render_lockfile(lock: Lockfile) -> str:
    """The TOML text of *lock*: the same entries always give the same bytes."""
    document: dict[str, Any] = {
        "version": LOCK_FORMAT_VERSION,
        "plugins": {e.name: _entry_table(e) for e in sorted(lock.entries, key=lambda e: e.name)},
    }
    return _HEADER + tomli_w.dumps(document)


def check_lockfile(path: Path) -> tuple[StateProblem, ...]:
    """The lock file's part of ``caplet doctor --check-state``: ``()`` when it reads cleanly.

    Reading is already strict (every entry and field validated), so a lock
    file caplet would refuse is exactly one that fails here. A missing
    file is fine: not every project pins its plugins.
    """
    try:
        read_lockfile(path, missing_ok=True)
    except LockfileError as exc:
        return (StateProblem(kind=ProblemKind.LOCKFILE, path=str(path), message=str(exc)),)
    return ()


def write_lockfile(lock: Lockfile) -> None:
    """Write *lock* to its path atomically (temp file, fsync, rename, directory fsync).

    Raises :class:`LockfileWriteError` when it cannot; the old file is then
    unchanged (the temporary file is removed).
    """
    try:
        atomic_write(lock.path, render_lockfile(lock).encode("utf-8"), mode=0o644)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            cause = (
                "no space left on device; free space on the file system holding "
                f"{lock.path.parent} and run the command again"
            )
        else:
            cause = f"{exc.strerror}; check that its directory exists and is writable"
        raise LockfileWriteError(
            f"cannot write the lock file {lock.path}: {cause}; the lock file is unchanged",
            path=str(lock.path),
        ) from exc


#: How long an update waits for the lock on the lock file's directory by default. An
#: update holds it for milliseconds; a longer wait means a process holds it that never
#: lets go (a plugin granted fs.read on the project can flock its directory).
LOCK_WAIT_S = 30.0
_FIRST_RETRY_S = 0.001
_LAST_RETRY_S = 0.05


@contextlib.contextmanager
def _directory_lock(path: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Serialise read-modify-write cycles of concurrent caplet processes on one lock file.

    The lock is an flock(2) on the lock file's directory: the file itself is
    replaced by rename on every write, so a lock on its inode would not
    exclude a process that opened the new one. flock(2) needs only a
    descriptor, so any process that can open the directory, a plugin
    granted ``fs.read`` on the project among them, can hold it; the wait is
    therefore bounded by *wait_s*, after which the update fails naming the
    holders (from /proc/locks) instead of hanging (red-team finding 11).
    """
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise LockfileError(
            f"cannot open the directory of the lock file {path} ({exc.strerror}); "
            "create it or choose another --lockfile",
            path=str(path),
        ) from exc
    try:
        deadline = time.monotonic() + wait_s
        retry = _FIRST_RETRY_S
        while True:
            try:
                # Released by close(2), or by the kernel when the process dies.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LockfileError(
                        f"the lock file {path} was not updated: its directory {path.parent} "
                        f"has been locked for {wait_s:g} s by {_lock_holders(fd)}; a caplet "
                        "update holds it for milliseconds, so this is a process that does "
                        "not let go (a plugin granted read access to that directory can "
                        "flock it): stop that process or disable the plugin, then retry; "
                        "the lock file is unchanged",
                        path=str(path),
                    ) from None
                time.sleep(min(retry, left))
                retry = min(retry * 2, _LAST_RETRY_S)
        yield
    finally:
        os.close(fd)


def _lock_holders(fd: int) -> str:
    """Who holds a lock on the open file *fd*, from /proc/locks: "pid 12 ('python3')"."""
    info = os.fstat(fd)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids: list[str] = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:
                fields = line.split()
                # "1: FLOCK  ADVISORY  READ 1234 08:01:5678 0 EOF"; "->" marks a waiter.
                if len(fields) >= 6 and fields[1] != "->" and fields[5] == inode:
                    pids.append(fields[4])
    except OSError:
        return "another process (/proc/locks cannot be read)"
    if not pids:
        return "another process (it let go just now)"
    return ", ".join(f"pid {pid} ({_command_of(pid)!r})" for pid in dict.fromkeys(pids))


def _command_of(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read(64).strip()
    except OSError:
        return "unknown"


def update_lockfile(
    path: Path, change: Callable[[Lockfile], Lockfile], *, wait_s: float = LOCK_WAIT_S
) -> Lockfile:
    """Read the lock file at *path* (missing: empty), apply *change*, write it; return it.

    Concurrent caplet processes updating one lock file take turns, so one
    process's entry is never lost to another's write. A lock held longer
    than *wait_s* fails the update with :class:`LockfileError` naming the
    holder, and the lock file is unchanged.
    """
    with _directory_lock(path, wait_s):
        lock = change(read_lockfile(path, missing_ok=True))
        write_lockfile(lock)
        return lock
