"""Plugins shipped as Python distributions (entry point group ``caplet.plugins``).

A distribution declares, in its metadata, one entry point per plugin whose
name is the plugin's name and whose value points at the plugin folder inside
the package, as a dotted package path with an optional folder below it::

    [project.entry-points."caplet.plugins"]
    hello = "acme_plugins:hello"          # <site-packages>/acme_plugins/hello/
    fs-tools = "acme_plugins.bundled"     # <site-packages>/acme_plugins/bundled/

Discovery reads only metadata (``*.dist-info/entry_points.txt`` through
:mod:`importlib.metadata`) and locates the folder on disk: nothing of the
distribution is imported in the host (an import would run its code with the
host's authority), and the digest is computed from the files on disk by the
tree hash, never taken from ``RECORD`` (which whoever wrote the files also
wrote). The same reading works on a wheel, which is how ``caplet update
--from acme_plugins-2.0-py3-none-any.whl`` stages a new version.

A plugin is credited to the distribution whose files it is (issue 14): an
entry point naming a folder that another distribution's ``RECORD`` lists is
skipped with both names, and so is one naming a folder no distribution lists
(whose it is cannot be told). ``RECORD`` is used only for that attribution,
never for the digest. Two distributions claiming one plugin name are a
collision the manager reports, loading neither (:mod:`caplet._host._manager`).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import stat
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from caplet._errors import PluginTreeError
from caplet._trust._hashing import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, EXCLUDED_DIRS

__all__ = [
    "ENTRY_POINT_GROUP",
    "InstalledPlugin",
    "SkippedEntryPoint",
    "extract_wheel_plugin",
    "find_installed",
]

ENTRY_POINT_GROUP = "caplet.plugins"

_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class InstalledPlugin:
    """A plugin folder inside an installed distribution."""

    name: str
    directory: Path
    distribution: str
    version: str
    #: The folder its distribution is installed in (``site-packages``, or a folder of
    #: the search path).
    site: Path


@dataclass(frozen=True, slots=True)
class SkippedEntryPoint:
    """An entry point that does not name a usable plugin folder, and why."""

    location: Path
    error: str


def _relative_folder(value: str) -> tuple[str, ...] | None:
    """The folder an entry point value names, as path segments; None when malformed."""
    module, _, folder = value.strip().partition(":")
    if not _MODULE_RE.fullmatch(module.strip()):
        return None
    segments = [*module.strip().split(".")]
    if folder.strip():
        parts = folder.strip().strip("/").split("/")
        if not all(_SEGMENT_RE.fullmatch(p) and p not in (".", "..") for p in parts):
            return None
        segments += parts
    return tuple(segments)


#: A distribution's name (PEP 508, as packaging's ``canonicalize_name(validate=True)``).
_NAME_RE = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE | re.ASCII)


def _dist_name(dist: importlib.metadata.Distribution) -> str:
    name = dist.metadata["Name"]
    return str(name) if name else "<unnamed distribution>"


def find_installed(
    path: Sequence[str | os.PathLike[str]] | None = None,
) -> tuple[list[InstalledPlugin], list[SkippedEntryPoint]]:
    """Every ``caplet.plugins`` entry point of the distributions on *path* (default ``sys.path``).

    The first distribution of a name on the path wins, as for imports. An
    entry point whose value is malformed, or whose folder is missing or
    outside the distribution, is returned as skipped with the reason.
    """
    search = [os.fspath(p) for p in path] if path is not None else None
    found: list[InstalledPlugin] = []
    skipped: list[SkippedEntryPoint] = []
    seen: set[str] = set()
    dists = (
        importlib.metadata.distributions(path=search)
        if search is not None
        else importlib.metadata.distributions()
    )
    for dist in dists:
        # A cheap text test first: parsing every distribution's METADATA
        # costs ~100 ms in an ordinary environment, on every discovery.
        text = dist.read_text("entry_points.txt")
        if not text or ENTRY_POINT_GROUP not in text:
            continue
        dist_name = _dist_name(dist)
        key = re.sub(r"[-_.]+", "-", dist_name).lower()
        if key in seen:
            continue
        seen.add(key)
        if not _NAME_RE.fullmatch(dist_name):
            # The name is part of the plugin's place (``distribution NAME in ROOT``): one
            # holding " in " made another environment's place ("a in /srv" in /x is "a" in
            # "/srv in /x"), a space or another sign no installer writes is as suspect (attack16).
            skipped.append(
                SkippedEntryPoint(
                    Path(str(dist.locate_file(""))),
                    f"distribution {dist_name!r} is not a valid distribution name (letters, "
                    "digits, '.', '_' and '-', starting and ending with a letter or digit: "
                    "PEP 508); none of its plugins loads: reinstall it from a correct build",
                )
            )
            continue
        for entry_point in dist.entry_points.select(group=ENTRY_POINT_GROUP):
            base = Path(str(dist.locate_file("")))
            segments = _relative_folder(entry_point.value)
            where = base / dist_name
            if segments is None:
                skipped.append(
                    SkippedEntryPoint(
                        where,
                        f"distribution {dist_name!r}: entry point {entry_point.name!r} = "
                        f"{entry_point.value!r} in group {ENTRY_POINT_GROUP!r} does not name a "
                        "plugin folder; write 'package.path' or 'package:folder'",
                    )
                )
                continue
            directory = base.joinpath(*segments)
            if not directory.is_dir() or directory.is_symlink():
                skipped.append(
                    SkippedEntryPoint(
                        directory,
                        f"distribution {dist_name!r}: entry point {entry_point.name!r} points at "
                        f"{directory}, which is not a directory; reinstall the distribution or "
                        "fix its entry point",
                    )
                )
                continue
            owned = _owns(dist, base, directory)
            if not owned:
                problem = _not_owned(dist_name, entry_point.name, directory, search)
                skipped.append(SkippedEntryPoint(directory, problem))
                continue
            found.append(
                InstalledPlugin(
                    name=entry_point.name,
                    directory=directory,
                    distribution=dist_name,
                    version=dist.version or "",
                    site=base,
                )
            )
    return found, skipped


def _owns(dist: importlib.metadata.Distribution, base: Path, directory: Path) -> bool:
    """True when *dist*'s ``RECORD`` lists a file inside *directory*."""
    try:
        files = dist.files
    except (OSError, ValueError):  # an unreadable or malformed RECORD
        return False
    if not files:
        return False
    try:
        prefix = directory.relative_to(base).parts
    except ValueError:
        return False
    width = len(prefix)
    return any(tuple(f.parts[:width]) == prefix and len(f.parts) > width for f in files)


def _not_owned(dist_name: str, entry_point: str, directory: Path, search: list[str] | None) -> str:
    """Why an entry point naming a folder its distribution does not ship is skipped."""
    dists = (
        importlib.metadata.distributions(path=search)
        if search is not None
        else importlib.metadata.distributions()
    )
    owners: list[str] = []
    for other in dists:
        base = Path(str(other.locate_file("")))
        if _owns(other, base, directory):
            owners.append(_dist_name(other))
    owners = sorted(set(owners) - {dist_name})
    if owners:
        return (
            f"distribution {dist_name!r}: entry point {entry_point!r} points at {directory}, "
            f"which belongs to distribution {' and '.join(repr(o) for o in owners)}, not to "
            f"{dist_name!r}; a plugin is credited to the distribution that ships it, so it is "
            f"skipped: fix {dist_name!r}'s entry point, or install the plugin from "
            f"{owners[0]!r} with an entry point of its own"
        )
    return (
        f"distribution {dist_name!r}: entry point {entry_point!r} points at {directory}, but "
        f"{dist_name!r}'s RECORD lists no file there (nor does any other installed "
        "distribution's), so caplet cannot tell whose plugin it is; reinstall "
        f"{dist_name!r} so that it ships the folder"
    )


def _wheel_folder(wheel: Path, name: str) -> tuple[str, ...]:
    """The folder (inside *wheel*) of plugin *name*, from the wheel's entry points."""
    try:
        dists = list(importlib.metadata.distributions(path=[os.fspath(wheel)]))
    except (OSError, zipfile.BadZipFile) as exc:
        raise PluginTreeError(
            f"{wheel} is not a readable wheel ({exc}); check the path, or rebuild the wheel"
        ) from exc
    for dist in dists:
        for entry_point in dist.entry_points.select(group=ENTRY_POINT_GROUP, name=name):
            segments = _relative_folder(entry_point.value)
            if segments is None:
                raise PluginTreeError(
                    f"wheel {wheel}: entry point {name!r} = {entry_point.value!r} does not name "
                    "a plugin folder; write 'package.path' or 'package:folder'"
                )
            return segments
    raise PluginTreeError(
        f"wheel {wheel} declares no entry point {name!r} in group {ENTRY_POINT_GROUP!r}; "
        "check the plugin name, or the wheel's [project.entry-points] table"
    )


def _members(archive: zipfile.ZipFile, prefix: str) -> Iterable[tuple[zipfile.ZipInfo, str]]:
    for info in archive.infolist():
        if info.filename.startswith(prefix) and not info.is_dir():
            yield info, info.filename[len(prefix) :]


def _refuse_collisions(wheel: Path, members: Iterable[tuple[zipfile.ZipInfo, str]]) -> None:
    """Refuse two members of one name, or a file's name that another member uses as a folder.

    A zip may hold both (zipfile warns, and keeps both); an installer keeps one
    of them, so what the review saw is not what would run. Written one after
    the other they used to raise ``FileExistsError`` out of ``caplet update``
    (attack10): checked here, before anything is written.
    """
    files: set[str] = set()
    folders: set[str] = set()
    for info, relative in members:
        parts = relative.split("/")
        above = {"/".join(parts[:end]) for end in range(1, len(parts))}
        if relative in files or relative in folders or above & files:
            raise PluginTreeError(
                f"wheel {wheel}: member {info.filename!r} has the name of another member, "
                "as a file or as a folder; an installer keeps only one of them, so the "
                "plugin would not be what was reviewed; rebuild the wheel without the "
                "duplicate"
            )
        files.add(relative)
        folders |= above


def extract_wheel_plugin(wheel: Path, name: str, dest: Path) -> Path:
    """Unpack plugin *name*'s folder from *wheel* into ``dest/<name>``; return that folder.

    The archive is untrusted input: members with absolute paths, ``..``,
    symbolic links or special files are refused, and so are more files or
    bytes than a plugin tree may hold (:mod:`caplet._trust._hashing`).
    """
    segments = _wheel_folder(wheel, name)
    prefix = "/".join(segments) + "/"
    target = dest / name
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise PluginTreeError(
            f"{wheel} is not a readable wheel ({exc}); check the path, or rebuild the wheel"
        ) from exc
    with archive:
        members = list(_members(archive, prefix))
        if not members:
            raise PluginTreeError(
                f"wheel {wheel} holds no files under {prefix!r}, the folder its entry point "
                f"{name!r} names; include the plugin folder in the wheel (package data)"
            )
        if len(members) > DEFAULT_MAX_FILES or (
            sum(info.file_size for info, _ in members) > DEFAULT_MAX_BYTES
        ):
            raise PluginTreeError(
                f"wheel {wheel}: the plugin folder {prefix!r} holds more than "
                f"{DEFAULT_MAX_FILES} files or {DEFAULT_MAX_BYTES} bytes; leave out of the "
                "plugin folder what the plugin does not need"
            )
        _refuse_collisions(wheel, members)
        target.mkdir(mode=0o755, parents=True)
        for info, relative in members:
            parts = relative.split("/")
            if any(p in ("", ".", "..") for p in parts) or "\\" in relative:
                raise PluginTreeError(
                    f"wheel {wheel}: member {info.filename!r} has an unsafe path; refusing it"
                )
            if set(parts) & EXCLUDED_DIRS:
                continue
            mode = (info.external_attr >> 16) & 0o177777
            # No file type bits at all (archives made on other systems): a file.
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise PluginTreeError(
                    f"wheel {wheel}: member {info.filename!r} is not a regular file "
                    "(a symbolic link or special file); refusing it"
                )
            try:
                _write_member(wheel, archive, info, target.joinpath(*parts), mode)
            except OSError as exc:  # a name too long for the file system, a full disk
                raise PluginTreeError(
                    f"wheel {wheel}: cannot write member {info.filename!r} "
                    f"({exc.strerror or exc}); rebuild the wheel, or free space"
                ) from exc
    return target


def _write_member(
    wheel: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, mode: int
) -> None:
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    with archive.open(info) as source, path.open("xb") as out:
        remaining = DEFAULT_MAX_BYTES
        while chunk := source.read(1024 * 1024):
            remaining -= len(chunk)
            if remaining < 0:
                raise PluginTreeError(
                    f"wheel {wheel}: member {info.filename!r} is larger than declared"
                )
            out.write(chunk)
    path.chmod(0o755 if mode & 0o111 else 0o644)
