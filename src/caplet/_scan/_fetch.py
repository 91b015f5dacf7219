"""A requirements file's packages, fetched from a package index for scanning, never run.

``caplet scan -r requirements.txt`` scans exactly the releases a lock-style
requirements file pins (``name==version``, as pip-compile writes it):

* the file is read with :mod:`packaging` (comments, blank lines, ``--hash``
  and other pip options are skipped; an unpinned line is an error naming
  the line, because "the latest release" changes under the reader);
* each release is looked up through the index's JSON simple API (PEP 691)
  and its sdist is downloaded (a package runs its ``setup.py`` from there),
  or, when there is none, its first wheel; the file's sha256 from the index
  is checked and its size bounded;
* the archives are written into a private directory the caller removes.

Nothing is built, installed or imported: ``pip download`` would run an
sdist's ``setup.py`` to read its metadata, which is exactly what must not
happen to a package under review.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caplet._errors import ScanError

__all__ = ["DEFAULT_INDEX", "Pinned", "default_index", "fetch", "read_requirements"]

DEFAULT_INDEX = "https://pypi.org/simple"
#: Largest distribution file downloaded for a scan.
MAX_DOWNLOAD = 256 * 1024 * 1024
_TIMEOUT = 60.0
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True, slots=True)
class Pinned:
    """One pinned requirement and where it was written."""

    name: str
    version: str
    line: int


def default_index(environ: Mapping[str, str]) -> str:
    """``CAPLET_INDEX_URL``, else pip's ``PIP_INDEX_URL``, else PyPI."""
    return environ.get("CAPLET_INDEX_URL") or environ.get("PIP_INDEX_URL") or DEFAULT_INDEX


#: Largest requirements file read (a lock file of thousands of pins is a few hundred kB).
MAX_REQUIREMENTS_BYTES = 4 * 1024 * 1024
#: pip options that install something besides the pins read here: what to do instead.
_NOT_FOLLOWED = {
    "-r": "scan that file too (caplet scan -r FILE)",
    "--requirement": "scan that file too (caplet scan -r FILE)",
    "-e": "scan that tree as a directory",
    "--editable": "scan that tree as a directory",
    "-f": "pip may take a release from there that was not scanned: remove it",
    "--find-links": "pip may take a release from there that was not scanned: remove it",
    "--extra-index-url": "pip may take a release from there that was not scanned: remove it",
}


def read_requirements(path: Path, index: str | None = None) -> list[Pinned]:
    """The pinned requirements of ``path``; an unpinned or unreadable line is a ScanError.

    So is a pip option that installs what the pins do not say (another requirements
    file, an editable tree, another index or link page), and, given the ``index`` the
    releases are fetched from, an ``--index-url`` naming a different one: pip would
    install other files than the ones scanned (scanfuzz).
    """
    from packaging.requirements import InvalidRequirement, Requirement

    pinned: list[Pinned] = []
    for number, raw in _lines(path):
        line = raw.split(" #", 1)[0].strip()
        if line.startswith("-"):
            _check_option(path, number, line, index)
        if not line or line.startswith(("#", "-")):
            continue  # comments, and pip options (-c, --hash lines, ...)
        line = line.split(" --", 1)[0].strip().rstrip("\\").strip()
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            raise ScanError(
                f"{path} line {number}: {raw.strip()!r} is not a requirement ({exc}); "
                "write name==version"
            ) from exc
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator not in {"==", "==="} or "*" in specs[0].version:
            raise ScanError(
                f"{path} line {number}: {requirement.name} is not pinned to one version; "
                "write name==version (pip-compile or pip freeze write such files)"
            )
        pinned.append(Pinned(requirement.name, specs[0].version, number))
    return pinned


def _lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines numbered, backslash continuations joined as pip joins them.

    Read without blocking and bounded: a requirements file that is a FIFO hung the
    scan, one linked to /dev/zero read until memory ran out (scanfuzz).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ScanError(
                    f"cannot read requirements file {path}: not a regular file "
                    "(a FIFO, device or directory); pass the file itself"
                )
            data = handle.read(MAX_REQUIREMENTS_BYTES + 1)
        if len(data) > MAX_REQUIREMENTS_BYTES:
            raise ScanError(
                f"cannot read requirements file {path}: larger than "
                f"{MAX_REQUIREMENTS_BYTES} bytes; split it"
            )
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(f"cannot read requirements file {path}: {exc}; check the path") from exc
    joined: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    # pip splits at universal newlines (str.splitlines) and joins a line ending in a
    # backslash with the next one (pip's req_file.join_lines), comments excepted
    for number, line in enumerate(text.splitlines(), start=1):
        if line.endswith("\\") and not line.lstrip().startswith("#"):
            start = start or number
            pending.append(line[:-1])
            continue
        if pending:
            joined.append((start, "".join([*pending, line])))
            pending, start = [], 0
        else:
            joined.append((number, line))
    if pending:
        joined.append((start, "".join(pending)))
    return joined


def _check_option(path: Path, number: int, line: str, index: str | None) -> None:
    """Refuse an option line that makes pip install something this scan does not see."""
    first, _, rest = line.partition(" ")
    if first.startswith("--"):
        name, equals, value = first.partition("=")
        value = value if equals else rest.strip()
    else:
        name, value = first[:2], (first[2:] or rest).strip()
    value = value.split()[0] if value.split() else value
    shown = f"{path} line {number}: {name} {value!r}"
    hint = _NOT_FOLLOWED.get(name)
    if hint is not None:
        raise ScanError(f"{shown} is not followed by the scan; {hint}")
    named = name in {"-i", "--index-url"} and index is not None
    if named and index is not None and value.rstrip("/") != index.rstrip("/"):
        raise ScanError(
            f"{shown}: pip installs from that index, this scan fetches from {index}; "
            f"pass --index-url {value} to scan what pip installs"
        )


def fetch(requirement: Pinned, index: str, into: Path, source: Path) -> Path:
    """Download ``requirement``'s sdist (else its first wheel) into ``into``, hash-checked."""
    import httpx
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        canonicalize_version,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    name = canonicalize_name(requirement.name)
    wanted = canonicalize_version(requirement.version)
    where = f"{source} line {requirement.line}: {requirement.name}=={requirement.version}"
    url = f"{index.rstrip('/')}/{name}/"
    try:
        with httpx.Client(timeout=_TIMEOUT, follow_redirects=True, trust_env=False) as client:
            answer = client.get(url, headers={"Accept": _SIMPLE_JSON})
            if answer.status_code == 404:
                raise ScanError(f"{where}: the index {index} has no project {name}")
            answer.raise_for_status()
            files: list[dict[str, Any]] = answer.json().get("files", [])
            sdists, wheels = [], []
            for item in files:
                filename = str(item.get("filename", ""))
                if item.get("yanked"):
                    continue
                try:
                    if filename.endswith(".whl"):
                        _, version, _, _ = parse_wheel_filename(filename)
                        if canonicalize_version(str(version)) == wanted:
                            wheels.append(item)
                    else:
                        _, version = parse_sdist_filename(filename)
                        if canonicalize_version(str(version)) == wanted:
                            sdists.append(item)
                except (InvalidSdistFilename, InvalidWheelFilename):
                    continue
            if not sdists and not wheels:
                raise ScanError(f"{where}: the index {index} has no file of that version")
            chosen = (sdists or wheels)[0]
            return _download(client, chosen, httpx.URL(url), into, where)
    except httpx.HTTPError as exc:
        raise ScanError(f"{where}: cannot reach the index {index} ({exc}); check the URL") from exc
    except ValueError as exc:  # a body that is not the JSON simple API
        raise ScanError(f"{where}: {index} did not answer with PEP 691 JSON ({exc})") from exc


def _download(client: Any, item: dict[str, Any], base: Any, into: Path, where: str) -> Path:
    filename = str(item["filename"])
    if "/" in filename or "\\" in filename or filename.startswith("."):
        raise ScanError(f"{where}: the index named a file {filename!r}, refused")
    expected = str(item.get("hashes", {}).get("sha256", ""))
    if not expected:
        raise ScanError(f"{where}: the index gave no sha256 for {filename}; nothing was scanned")
    target = into / filename
    digest = hashlib.sha256()
    size = 0
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with client.stream("GET", base.join(str(item["url"]))) as response:
        response.raise_for_status()
        with os.fdopen(os.open(target, flags, 0o600), "wb") as out:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_DOWNLOAD:
                    raise ScanError(f"{where}: {filename} is larger than {MAX_DOWNLOAD} bytes")
                digest.update(chunk)
                out.write(chunk)
    if digest.hexdigest() != expected:
        target.unlink()
        raise ScanError(f"{where}: {filename} does not match the index's sha256; not scanned")
    return target
