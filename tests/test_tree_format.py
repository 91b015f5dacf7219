"""The tree hash's encoding, the one the host's walk and the jail's check share."""

from __future__ import annotations

import hashlib

import pytest

from caplet._tree_format import entry_header, hashed_mode, new_digest, tree_digest


def test_each_field_is_length_prefixed_and_the_mode_normalised() -> None:
    assert entry_header("a/b.py", 0o600, 3) == (
        (6).to_bytes(8, "big") + b"a/b.py" + (0o644).to_bytes(4, "big") + (3).to_bytes(8, "big")
    )
    assert hashed_mode(0o700) == hashed_mode(0o501) == 0o755
    assert hashed_mode(0o444) == 0o644


def test_a_name_that_is_not_utf8_cannot_be_encoded() -> None:
    with pytest.raises(UnicodeEncodeError):
        entry_header("bad\udcff", 0o644, 0)


def test_the_digest_is_domain_separated_and_prefixed() -> None:
    digest = new_digest()
    assert tree_digest(digest).startswith("sha256-")
    assert tree_digest(digest) != "sha256-" + hashlib.sha256(b"").hexdigest()
