"""The tree hash's encoding, shared by the host and the jail.

:mod:`caplet._trust._hashing` walks and hashes a plugin tree on the host;
the jail's pid 1 hashes its own copy of the enable's snapshot before the
worker loads it (:func:`caplet._sandbox._jail_copy.copy_grant`). Both must
agree byte for byte, and the jail may not import the trust layer: pid 1
becomes the worker, which must hold no host-side class (the selftest case
``subclasses-walk`` walks ``object.__subclasses__()`` for them). So the
encoding lives here, in the base layer, with no class of its own.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "EXCLUDED_DIRS",
    "HASH_PREFIX",
    "SIGNATURE_FILE",
    "entry_header",
    "hashed_mode",
    "is_executable",
    "new_digest",
    "tree_digest",
]

#: Every content hash starts with this, so the algorithm can change later.
HASH_PREFIX = "sha256-"

#: Domain separation: a tree hash can never equal the hash of some file.
_DOMAIN = b"caplet-tree-v1\0"

#: Directories that never count, at any depth: VCS metadata, and byte-code
#: caches that importing the plugin writes next to its sources.
EXCLUDED_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", "__pycache__"})

#: The publisher's signature of the tree hash (:mod:`caplet._trust._signing`),
#: at the top of the plugin folder. It is the one file the hash (and so the
#: snapshot and the scan) leaves out: it cannot be part of the content it
#: signs, and the host only ever parses it as a signature, never loads it.
SIGNATURE_FILE = "plugin.minisig"


def is_executable(mode: int) -> bool:
    """True when any execute bit is set (what ``chmod +x`` changes)."""
    return bool(mode & 0o111)


def hashed_mode(mode: int) -> int:
    """The mode as it enters the hash: ``0o755`` if executable, else ``0o644``.

    Normalised like git's file modes (see :mod:`caplet._trust._hashing`).
    """
    return 0o755 if is_executable(mode) else 0o644


def new_digest() -> hashlib._Hash:
    """A digest to feed entries into, in the tree's order (sorted by UTF-8 path)."""
    return hashlib.sha256(_DOMAIN)


def entry_header(path: str, mode: int, size: int) -> bytes:
    """What precedes a file's bytes: 8-byte big-endian path length, the UTF-8
    path, 4-byte mode (:func:`hashed_mode`), 8-byte length. Every field is
    length-prefixed so no two different trees share an encoding.

    Raises :class:`UnicodeEncodeError` for a name that is not UTF-8.
    """
    encoded = path.encode("utf-8")
    return (
        len(encoded).to_bytes(8, "big")
        + encoded
        + hashed_mode(mode).to_bytes(4, "big")
        + size.to_bytes(8, "big")
    )


def tree_digest(digest: hashlib._Hash) -> str:
    """The tree hash (``"sha256-" + hex``) of everything fed to ``digest``."""
    return HASH_PREFIX + digest.hexdigest()
