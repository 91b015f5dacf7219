"""Build requirements fetched from a direct URL (CPL-THR-019).

pip installs a package's ``[build-system] requires`` before it builds the sdist, and
runs them: a requirement given as a direct reference (``helper @ https://host/h.tar.gz``,
``git+https://...``, PEP 508) is code from a URL nobody reviewed, fetched and run at
install time, as ``pip.main(["install", URL])`` in ``setup.py`` is. blind16's
b16-dr-build-requires-url required its "wheel helper" so and was clean (recall17).
Requirements by name and version come from the index the user chose (the build
backends, setuptools-scm, Cython); a local path (``file:``, a folder) fetches nothing.
Only the ``pyproject.toml`` pip reads: at the root or one folder down (an sdist's).
"""

from __future__ import annotations

import tomllib
from typing import Final

from caplet._findings import Finding
from caplet._scan._filescan import FileScan
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._toml import TomlLimitError, parse_toml

__all__ = ["build_requirement_findings", "pyproject_pip_reads"]

#: The schemes pip fetches a direct reference from (a VCS's ``+`` forms included).
_REMOTE: Final = ("http://", "https://", "ftp://", "git+", "hg+", "svn+", "bzr+", "git://")
#: Requirements read from one file, at most.
_MAX_REQUIREMENTS = 256


def pyproject_pip_reads(relative: str) -> bool:
    """Whether ``relative`` is a ``pyproject.toml`` pip reads to build the package."""
    return relative.rsplit("/", 1)[-1] == "pyproject.toml" and relative.count("/") <= 1


def build_requirement_findings(relative: str, data: bytes, mode: ScanMode) -> list[Finding]:
    """CPL-THR-019 for each build requirement of ``data`` (a ``pyproject.toml``) that pip
    fetches from a remote URL; nothing for a file that is not TOML (pip refuses it)."""
    try:
        table = parse_toml(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    except TomlLimitError as exc:
        # Beyond what caplet parses (a dotted key pip's parser takes quadratic time on,
        # nesting past the stack, an integer past 64 bits): its build requirements and
        # backend are not known, so it is not known to be clean (attack29: the integer
        # and the nesting raised out of the scan, the dotted key took minutes).
        scan = FileScan(relative, "", NO_GRANTS, (), mode)
        scan.emit(
            "CPL-SCAN-002",
            f"pyproject.toml: {exc}",
            1,
            None,
            escalation="pip reads this file for the build requirements and backend it runs, "
            "which are not known",
        )
        return scan.findings
    system = table.get("build-system")
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list):
        return []
    text = data.decode("utf-8")
    scan = FileScan(relative, text, NO_GRANTS, (), mode)
    lines = text.split("\n")
    for requirement in requires[:_MAX_REQUIREMENTS]:
        url = _remote_url(requirement) if isinstance(requirement, str) else None
        if url is not None:
            line = next((n for n, t in enumerate(lines, 1) if url in t), 0)
            scan.emit(
                "CPL-THR-019",
                f"the build requirement {requirement.strip()[:160]!r} (fetched from its URL "
                "and run as pip builds)",
                line,
                None,
            )
    return scan.findings


def _remote_url(requirement: str) -> str | None:
    """The remote URL a PEP 508 requirement is fetched from (``name @ url`` or a bare
    URL), else ``None``."""
    name, at, reference = requirement.partition("@")
    given = reference if at and not name.strip().lower().startswith(_REMOTE) else requirement
    url = given.strip().split(";", 1)[0].strip()
    return url if url.lower().startswith(_REMOTE) else None
