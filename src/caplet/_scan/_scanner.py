"""The static scanner: rules over a plugin tree or any Python package, without running any of it.

Each ``*.py`` file is decoded, parsed with :func:`ast.parse` and visited
once; nothing is imported or executed (design.md section 4, layer 2). This
module is the entry point; the work is split by concern:

* collection (:mod:`caplet._scan._collect`): walking trees and reading
  archives, file names and raw bytes, sizes and read errors;
* one file's pass (:mod:`caplet._scan._filepass`): the package-mode
  prefilter, parsing, the survey (:mod:`caplet._scan._syntax`) and the text
  rules (:mod:`caplet._scan._filescan`);
* the rules (:mod:`caplet._scan._visitor`, tables in
  :mod:`caplet._scan._rules`) and the data flow behind the threat rules
  (:mod:`caplet._scan._flow`, :mod:`caplet._scan._sinks`, tables in
  :mod:`caplet._scan._sources`), per-file chains
  (:mod:`caplet._scan._correlate`);
* the verdict (:mod:`caplet._scan._verdict`): severity by scan mode and
  capability, de-duplication, unused capabilities.

Severity is capability-aware: a finding whose behaviour a declared (and
already substituted) capability covers is lowered to the rule's covered
severity and marked ``covered``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, assert_never

from caplet._capabilities._model import Capability
from caplet._errors import ScanError
from caplet._findings import Finding
from caplet._scan._archive import (
    DEFAULT_LIMITS,
    NESTED_LIMITS,
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
    detect_format,
    iter_archive,
    iter_nested,
)
from caplet._scan._archive_format import nested_by_name
from caplet._scan._collect import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_NODES,
    Collector,
    Entry,
    EntryKind,
    Limits,
    decode_source,
    installers,
    local_modules,
    read_source,
    script_name,
    walk,
    wanted,
)
from caplet._scan._collect_read import read_head
from caplet._scan._filepass import scan_text
from caplet._scan._grants import Grants
from caplet._scan._installer_imports import (
    build_backends,
    build_hooks,
    command_modules,
    installer_modules,
)
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._selfcheck import self_check
from caplet._scan._verdict import finish

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_NODES",
    "scan_source",
    "scan_tree",
]


def _check_limits(**limits: int) -> None:
    for name, value in limits.items():
        if value < 1:
            raise ScanError(f"scanner limit {name} must be a positive integer, got {value}")


def scan_source(
    source: str,
    filename: str,
    capabilities: Sequence[Capability] = (),
    *,
    local_modules: Collection[str] = (),
    mode: ScanMode = ScanMode.PLUGIN,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[Finding]:
    """Findings for one in-memory Python file, sorted by :meth:`Finding.sort_key`.

    ``filename`` is used as the findings' ``file``; ``local_modules`` are the
    plugin's own top-level module names (not third-party imports).
    """
    self_check()  # refuse to scan with a rule engine that misses its canaries
    _check_limits(max_depth=max_depth, max_nodes=max_nodes)
    findings, _ = scan_text(
        source,
        filename,
        grants=Grants.of(capabilities),
        local_modules=local_modules,
        max_depth=max_depth,
        max_nodes=max_nodes,
        mode=mode,
    )
    return finish(findings)


def scan_tree(
    root: Path | str,
    capabilities: Sequence[Capability] = (),
    *,
    mode: ScanMode = ScanMode.PLUGIN,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
    progress: Callable[[int, int], None] | None = None,
) -> ScanReport:
    """Scan every ``*.py`` file under ``root`` (a directory, or one file).

    All file names are checked for native libraries, bytecode and install
    hooks; ``__pycache__`` and VCS folders are skipped; symlinks and special
    files are reported, never followed. Limits turn pathological files into
    WARNING findings instead of hangs or crashes (in package mode a file over
    ``max_file_bytes`` is still read, up to a hard cap, and visited around
    its threat tokens). ``mode`` decides what is danger (:class:`ScanMode`);
    ``capabilities`` are the plugin's declared ones (plugin mode).
    ``progress(done, total)`` is called after each entry. Raises
    :class:`ScanError` only when ``root`` itself cannot be scanned, or when
    the scanner's self-check fails.
    """
    self_check()  # refuse to scan with a rule engine that misses its canaries
    _check_limits(max_file_bytes=max_file_bytes, max_depth=max_depth, max_nodes=max_nodes)
    limits = Limits(max_file_bytes, max_depth, max_nodes)
    if not isinstance(root, (str, Path)):
        raise ScanError(
            f"cannot scan {root!r}: expected a path (str or pathlib.Path) to a directory or file"
        )
    # A str is what most callers have (it raised AttributeError, a traceback, before).
    root = Path(root)
    try:
        root_is_dir = root.is_dir()
        root_is_file = not root_is_dir and root.is_file()
    except OSError as exc:
        raise ScanError(f"cannot scan {root}: {exc.strerror}; check the path") from exc
    if root_is_dir:
        try:
            entries = list(walk(root))
        except OSError as exc:
            raise ScanError(
                f"cannot scan {root}: {exc.strerror}; make the directory readable"
            ) from exc
    elif root_is_file:
        if detect_format(root) is not None:
            return _scan_archive(root, capabilities, mode, limits, progress)
        entries = [Entry(os.fspath(root), root.name, EntryKind.FILE)]
    else:
        raise ScanError(
            f"cannot scan {root}: no such file or directory; "
            "pass a plugin directory, a Python file, an sdist or a wheel"
        )
    relatives = [e.relative for e in entries]
    paths = {e.relative: e.path for e in entries if e.kind is EntryKind.FILE}
    scripts, starts = install_scripts(paths, lambda r: _text_of(paths[r], limits))
    collector = Collector(
        capabilities, mode, limits, local_modules(relatives), scripts, install_entries=starts
    )
    total = len(entries)
    for done, entry in enumerate(entries, start=1):
        kind = entry.kind
        if kind is EntryKind.UNREADABLE_DIR:
            collector.file_problem(entry.relative, "CPL-SCAN-004", f"directory: {entry.detail}")
        elif kind is EntryKind.OTHER:
            collector.special_file(entry.relative)
        elif kind is EntryKind.FILE:
            if wanted(entry.relative):
                collector.add_path(entry.relative, entry.path)
            else:
                collector.note_other(entry.relative, entry.path)
                if mode is ScanMode.PACKAGE and (
                    nested_by_name(entry.relative) or _zip_by_content(entry.relative, entry.path)
                ):
                    _nested_on_disk(collector, entry.relative, entry.path)
        else:
            assert_never(kind)
        if progress is not None:
            progress(done, total)
    return collector.report(root.as_posix())


def _scan_archive(
    root: Path,
    capabilities: Sequence[Capability],
    mode: ScanMode,
    limits: Limits,
    progress: Callable[[int, int], None] | None,
) -> ScanReport:
    """Scan an sdist or wheel member by member, in memory (nothing is extracted).

    A plugin shipped as an archive is listed first so its own modules are known.
    In package mode the members stream through one at a time, but for its sources
    (and ``pyproject.toml``), which are held until the archive has been read: what
    ``setup.py`` or an in-tree build backend imports is an install script only once
    every member's name is known (:func:`_install_scripts`), as for the same tree on
    disk. An sdist scanned so missed pip run from a module beside ``setup.py``
    (CPL-THR-019) that the unpacked tree flagged (attack8). The sources held are
    bounded by the archive's own limits (its total bytes, as a plugin's listing is).
    """
    items: Iterable[ArchiveMember | ArchiveProblem] = _expanded(
        iter_archive(root), _link_budget(root)
    )
    local: frozenset[str] = frozenset()
    scripts: frozenset[str] | None = None
    entries: frozenset[str] = frozenset()
    total = 0
    if mode is ScanMode.PLUGIN:
        listed = list(items)
        listed += _linked(root, listed)
        items, total = listed, len(listed)
        names = [i.relative for i in listed if isinstance(i, ArchiveMember)]
        local = local_modules(names)
        scripts, entries = _install_scripts(
            [i for i in listed if isinstance(i, ArchiveMember)], limits
        )
    collector = Collector(capabilities, mode, limits, local, scripts, install_entries=entries)
    held: list[ArchiveMember] = []
    links: list[ArchiveProblem] = []
    done = 0
    for done, item in enumerate(items, start=1):
        if isinstance(item, ArchiveMember):
            if mode is ScanMode.PACKAGE and _held(item.relative):
                held.append(item)
                continue
            collector.add_member(item)
        else:
            collector.archive_problem(item, item.relative or root.name)
            if mode is ScanMode.PACKAGE and item.target:
                links.append(item)
        if progress is not None:
            progress(done, max(total, done))
    for member in _linked(root, links):
        if isinstance(member, ArchiveProblem):
            collector.archive_problem(member, member.relative)
        elif _held(member.relative):
            held.append(member)
        else:
            collector.add_member(member)
    if held:
        collector.install_scripts, collector.install_entries = _install_scripts(held, limits)
        for member in held:
            collector.add_member(member)
        if progress is not None:
            progress(done, done)
    return collector.report(root.as_posix())


def _expanded(
    items: Iterable[ArchiveMember | ArchiveProblem], budget: int
) -> Iterator[ArchiveMember | ArchiveProblem]:
    """``items``, each zip inside the archive followed by its own members
    (:func:`~caplet._scan._archive.iter_nested`: a zip on ``sys.path`` is imported
    from, attack8).

    Each zip has caps of its own, so alone they multiplied the archive's: a 1.7 kB
    sdist of 100 copies of one 1.6 kB zip of a 1 MB module (each under the floor below
    which no ratio is checked) was 100 MB of source to scan and hold (scandos37). The
    members of all of them share ``budget``, what the archive itself may expand to; a
    zip past it is not opened, and the archive is a bomb (CPL-ARC-002): its own
    expansion, not a trick inside one zip (those stay a nested archive's warning).
    """
    left = budget
    for item in items:
        yield item
        if not (isinstance(item, ArchiveProblem) and item.data):
            continue
        if left <= 0:
            yield _unopened(item, budget)
            continue
        for member in iter_nested(item):
            if isinstance(member, ArchiveMember):
                left -= len(member.data)
                if left < 0:
                    yield _unopened(item, budget)
                    break
            yield member


def _unopened(item: ArchiveProblem, budget: int) -> ArchiveProblem:
    detail = (
        f"the zips inside the archive expand past {budget} bytes (what the archive itself"
        " may expand to); the rest of this one was not opened: ship its files unpacked"
    )
    return ArchiveProblem(item.relative, ArchiveProblemKind.TOTAL_TOO_LARGE, detail)


#: Endings of formats that are not zips, or zips no importer reads (office documents): a
#: data file of any other name is sniffed for a zip's magic.
_NOT_SNIFFED: Final = (
    ".txt",
    ".md",
    ".rst",
    ".json",
    ".html",
    ".htm",
    ".css",
    ".js",
    ".ts",
    ".map",
    ".svg",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".ico",
    ".webp",
    ".ttf",
    ".otf",
    ".woff",
    ".woff2",
    ".pdf",
    ".c",
    ".h",
    ".cpp",
    ".hpp",
    ".pyi",
    ".pyx",
    ".pxd",
    ".cfg",
    ".toml",
    ".yaml",
    ".yml",
    ".ini",
    ".xml",
    ".csv",
    ".po",
    ".mo",
    ".in",
    ".typed",
    ".docx",
    ".xlsx",
    ".pptx",
    ".odt",
    ".ods",
    ".epub",
)


def _zip_by_content(relative: str, path: str) -> bool:
    """A data file that is a zip whatever its name (``locales.dat`` loaded by
    ``zipimport``: blind17, b17-np-zipimport-dat): read as a nested zip is."""
    if relative.lower().endswith(_NOT_SNIFFED):
        return False
    head = read_head(path)
    return isinstance(head, bytes) and head.startswith(b"PK\x03\x04")


def _nested_on_disk(collector: Collector, relative: str, path: str) -> None:
    """A zip of a directory tree read as an archive's nested zip is (package mode)."""
    data = read_source(path, NESTED_LIMITS.max_total_bytes)
    if not isinstance(data, bytes):
        return
    problem = ArchiveProblem(relative, ArchiveProblemKind.NESTED_ARCHIVE, "", data=data)
    for item in iter_nested(problem):
        if isinstance(item, ArchiveMember):
            collector.add_member(item)
        else:
            collector.archive_problem(item, item.relative)


#: Links followed to the member they name, at most (a link to a link to ...).
_MAX_LINK_HOPS = 8


def _linked(
    root: Path, items: Sequence[ArchiveMember | ArchiveProblem]
) -> list[ArchiveMember | ArchiveProblem]:
    """The links among ``items`` (an archive's problems) that are read as code, each
    as a member of its own name holding the bytes of the member it points to: pip
    extracts a link inside the tree, so a ``setup.py`` (or a module, a command) linked
    to ``README.txt`` runs README's bytes, which no rule read as Python (attack8).
    The archive is read again only when there is such a link.

    A link is a header of no data, so each one's bytes count against what the
    archive may expand to (:func:`_link_budget`): 40 hard links to one 200 kB module
    in a 23 kB sdist were 40 files of 200 kB to scan (35 s in plugin mode; 100,000
    links, the member cap, hours), past every cap the decompressed bytes meet
    (scandos37). The links past it are a bomb (CPL-ARC-002), not read.
    """
    targets = {i.relative: i.target for i in items if isinstance(i, ArchiveProblem) and i.target}
    wanted_links = [r for r in targets if _held(r) or script_name(r)]
    if not wanted_links:
        return []
    final: dict[str, str] = {}
    for link in wanted_links:
        target = targets[link]
        for _ in range(_MAX_LINK_HOPS):
            if target not in targets:
                break
            target = targets[target]
        final[link] = target
    needed = set(final.values())
    data: dict[str, bytes] = {}
    expanded = 0
    for item in iter_archive(root):
        if isinstance(item, ArchiveMember):
            expanded += len(item.data)
            if item.relative in needed:
                data[item.relative] = item.data  # the last copy, as for the member itself
    budget = _link_budget(root) - expanded
    read: list[ArchiveMember | ArchiveProblem] = []
    pending = [(link, data[t]) for link, t in final.items() if t in data]
    for done, (link, held) in enumerate(pending):
        if len(held) > budget:
            left = len(pending) - done
            detail = (
                f"{left} link(s) to members of the archive would be read past"
                f" {_link_budget(root)} bytes ({DEFAULT_LIMITS.max_ratio} times its"
                f" {_packed_size(root)} bytes, or its total cap); not read: ship each file"
                " itself, not links to one"
            )
            read.append(ArchiveProblem(link, ArchiveProblemKind.TOTAL_TOO_LARGE, detail))
            break
        budget -= len(held)
        read.append(ArchiveMember(link, held))
    return read


def _packed_size(root: Path) -> int:
    try:
        return root.stat().st_size
    except OSError:  # gone since it was read: no budget beyond the floor
        return 0


def _link_budget(root: Path) -> int:
    """The bytes an archive's members and links together may come to: what its caps let
    its decompressed bytes reach (the ratio to its size on disk, past the floor below
    which the ratio is not checked, and the total cap)."""
    limits = DEFAULT_LIMITS
    by_ratio = max(limits.ratio_floor_bytes, limits.max_ratio * _packed_size(root))
    return min(limits.max_total_bytes, by_ratio)


def _in_nested(relative: str) -> bool:
    """Whether ``relative`` names a member of a zip inside the archive."""
    return any(nested_by_name(part) for part in relative.split("/")[:-1])


def _held(relative: str) -> bool:
    """Whether package mode holds an archive's member until every name is known."""
    return wanted(relative) or relative.rsplit("/", 1)[-1] in {"pyproject.toml", "setup.cfg"}


def _install_scripts(
    members: Sequence[ArchiveMember], limits: Limits
) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`install_scripts` of an archive's ``members`` (its sources and
    ``pyproject.toml``), as scan_tree finds them for the same tree on disk."""
    # the last copy: the one pip unpacks; a zip's members are no install script
    data = {m.relative: m.data for m in members if not _in_nested(m.relative)}

    def text(relative: str) -> str | None:
        raw = data[relative]
        return decode_source(raw) if len(raw) <= limits.max_file_bytes else None

    return install_scripts(data, text)


def install_scripts(
    present: Collection[str], read: Callable[[str], str | None]
) -> tuple[frozenset[str], frozenset[str]]:
    """The tree's install scripts (the files ``present``, ``read`` gives a file's text):
    every file pip runs or imports to install it, and of them the ones it runs itself
    (``setup.py``, an in-tree PEP 517 backend's modules), whose network, credential and
    launch chains are the installer's (CPL-THR-011); a module they import runs only as
    far as they call into it (lxml's buildlibxml.py)."""
    entries = installers(present)
    # an in-tree PEP 517 build backend is imported by pip to build: an install script
    # too, and the one pip calls (its hooks), as it runs setup.py (attack8)
    entries |= build_backends(present, read)
    # setuptools commands named in pyproject.toml or setup.cfg are imported to build, and
    # a backend's hook file (hatch_build.py, pdm_build.py) is called while pip builds
    # (recall16): install scripts, whose network chains stay a module's, as a command's
    # (nbconvert's hook fetches its stylesheets)
    scripts = entries | command_modules(present, read) | build_hooks(present, read)
    # what setup.py imports from beside it runs at install time too (issue 16)
    return scripts | installer_modules(scripts, present, read), entries


def _text_of(path: str, limits: Limits) -> str | None:
    """A file's text for following an install script's imports (``None``: unreadable
    or over the size limit; the file is still scanned, and its problem reported, later)."""
    data = read_source(path, limits.max_file_bytes)
    return decode_source(data) if isinstance(data, bytes) else None
