"""The rules about the manifest, mitigations, archives and the scan itself.

What the manifest says versus what the code does, defensive code, archive tricks, and
files the scan could not read.
"""

from __future__ import annotations

from typing import Final

from caplet._capabilities._model import CapabilityKind
from caplet._findings import Severity
from caplet._scan._rule_model import Rule, RuleFamily, RuleKind

__all__ = ["SCAN_RULES"]

_D, _W, _I = Severity.DANGER, Severity.WARNING, Severity.INFO
_K = CapabilityKind

#: Manifest, mitigation, archive and scanner rules, in the catalogue's order.
SCAN_RULES: Final[tuple[Rule, ...]] = (
    # -- what the manifest says versus what the code does -----------------------------------
    Rule(
        "CPL-NET-003",
        RuleFamily.NETWORK,
        _W,
        _I,
        _K.NET_HTTP,
        "URL {api} names a host no net.http capability declares",
        "declare net.http for that origin, or remove the URL",
        rationale="every host a plugin talks to must be visible in its manifest",
    ),
    Rule(
        "CPL-MAN-001",
        RuleFamily.SUPPLY_CHAIN,
        _I,
        None,
        None,
        "declared capability {api} is never used by the code (over-broad manifest)",
        "remove the capability from the manifest",
        kind=RuleKind.SIGNAL,
        rationale="capabilities nobody uses are attack surface an approver grants for nothing",
    ),
    # -- mitigations: defensive code, shown in the report --------------------------------------
    Rule(
        "CPL-MIT-001",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} resolves or refuses symlinks",
        "",
        kind=RuleKind.MITIGATION,
        rationale="resolving links before a check closes symlink escapes",
    ),
    Rule(
        "CPL-MIT-002",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} guards against path traversal",
        "",
        kind=RuleKind.MITIGATION,
        rationale="containment checks keep '..' inside the granted directory",
    ),
    Rule(
        "CPL-MIT-003",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} caps a size",
        "",
        kind=RuleKind.MITIGATION,
        rationale="size caps stop memory and disk exhaustion",
    ),
    # -- archives (sdists and wheels read without extracting) ------------------------------
    Rule(
        "CPL-ARC-001",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "archive member {api} would be written outside the install directory",
        "rebuild the archive with relative member names only",
        kind=RuleKind.THREAT,
        rationale="absolute and '..' member names overwrite files on extraction (CVE-2007-4559)",
    ),
    Rule(
        "CPL-ARC-002",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "archive {api} expands far beyond its size (decompression bomb)",
        "ship the data uncompressed or split it",
        kind=RuleKind.THREAT,
        rationale="a bomb exhausts the disk or memory of whoever installs or scans it",
    ),
    Rule(
        "CPL-ARC-003",
        RuleFamily.INSTALL_HOOK,
        _W,
        None,
        None,
        "archive member {api} is a link, a special file, a duplicate or an odd name",
        "replace it with a regular file of a plain name",
        kind=RuleKind.SIGNAL,
        rationale="links, duplicates and odd names make the installed tree differ from the "
        "scanned one",
    ),
    Rule(
        "CPL-ARC-004",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: archive member {api}",
        "rebuild the archive, or scan its members after extracting them",
        kind=RuleKind.SCANNER,
        rationale="nested, corrupt or oversized members are not known to be clean",
    ),
    # -- the scan itself ---------------------------------------------------------------------------
    Rule(
        "CPL-SCAN-001",
        RuleFamily.SCANNER,
        # Danger for a plugin (the gate fails closed: padding a plugin.py past
        # the limit hid `import ctypes` from it); a warning in package mode.
        _D,
        None,
        None,
        "not scanned: too large ({api})",
        "split the file (a plugin's code that was not scanned is refused) or raise max_file_bytes",
        kind=RuleKind.SCANNER,
        rationale="a file too large to scan is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-002",
        RuleFamily.SCANNER,
        # Danger for a plugin, as CPL-SCAN-001: an 800-term expression made the
        # whole file "too complex" and its `import ctypes` passed the gate.
        _D,
        None,
        None,
        "not scanned: too complex ({api})",
        "simplify the code (split deep expressions, shorten the file): a plugin's code "
        "that was not scanned is refused",
        kind=RuleKind.SCANNER,
        rationale="a file too complex to scan is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-003",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "does not parse as Python ({api}); code rules were not applied",
        "fix the syntax or encoding error",
        kind=RuleKind.SCANNER,
        rationale="code that does not parse cannot be checked by the AST rules",
    ),
    Rule(
        "CPL-SCAN-004",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: cannot be read ({api})",
        "make the file readable by the scanning user",
        kind=RuleKind.SCANNER,
        rationale="an unreadable file is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-005",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: {api} is not a regular file (symlinks are not followed)",
        "replace the link or special file with a regular file",
        kind=RuleKind.SCANNER,
        rationale="links and special files are never followed, so their targets are unscanned",
    ),
    Rule(
        "CPL-SCAN-006",
        RuleFamily.SCANNER,
        # Danger for a plugin, as CPL-SCAN-001: a plugin extracted a tar it shipped and
        # imported what was in it, code the scanner and the auditor never read (steer22).
        _D,
        None,
        None,
        "not scanned: {api} is an archive the scanner does not read",
        "ship its files unpacked in the plugin: a plugin's code that was not scanned is refused",
        kind=RuleKind.SCANNER,
        rationale="code in an archive a plugin ships is not known to be clean",
    ),
)
