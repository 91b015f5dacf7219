"""The rules an audit was made by: a digest of the code that judges a plugin.

Audits are cached by content hash and auditor and reused: by ``caplet approve``, by
discovery, by every enable's danger gate and risk policy. An audit made by an earlier
caplet keeps that caplet's verdict: a plugin judged MEDIUM before CPL-SCAN-006 read its
archive stayed MEDIUM after the upgrade, and passed the gate on it (steer22). So every
audit records :func:`rules_digest`, and a cached one made by other rules is not reused.

The digest covers what decides a verdict: the scanner's fingerprint
(:func:`caplet._scan._checkcache.fingerprint`: caplet's version, the interpreter, every
file of the scanner, the modules it reads, google-re2), this package (the prompt, the
canaries, the answer's reading, the verdict rules) and the composition lint. Computed once
per process, on first use (about 20 ms). A file that cannot be read gives ``""``: no
audit is then reused (the safe answer).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from caplet._capabilities import _lint
from caplet._scan._checkcache import fingerprint

__all__ = ["rules_digest"]


@functools.cache
def rules_digest() -> str:
    """32 hex digits naming the rules of this process's audits, or ``""`` when unknown."""
    scanner = fingerprint()
    if scanner is None:
        return ""
    digest = hashlib.sha256(f"caplet-audit-rules-v1\0{scanner}\0".encode())
    files = [*sorted(Path(__file__).parent.glob("*.py")), Path(_lint.__file__)]
    try:
        for path in files:
            data = path.read_bytes()
            digest.update(f"{path.name}\0{len(data)}\0".encode())
            digest.update(data)
    except OSError:
        return ""
    return digest.hexdigest()[:32]
