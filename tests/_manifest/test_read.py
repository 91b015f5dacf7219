"""Reading a manifest's bytes: what :func:`find_manifest` checked is what is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._errors import ManifestError
from caplet._manifest._read import MAX_MANIFEST_BYTES, read_manifest_data


def test_the_manifest_is_read_without_following_a_link_or_waiting_on_a_fifo(
    tmp_path: Path,
) -> None:
    # attack10: find_manifest checked the name with lstat, then the read opened
    # it again by name, following links and blocking. Whoever can write the
    # plugin folder swaps plugin.toml in between: for a link, the host (root)
    # parsed any file as the manifest; for a FIFO, every discovery
    # (`caplet list`, a host's start) waited for ever. The swapped-in state:
    outside = tmp_path / "outside.toml"
    outside.write_text('name = "not-the-plugins"\nsecret = "host data"\n', encoding="utf-8")
    (tmp_path / "linked").mkdir()
    link = tmp_path / "linked" / "plugin.toml"
    link.symlink_to(outside)
    with pytest.raises(ManifestError, match=r"plugin\.toml: must be a regular file") as caught:
        read_manifest_data(link)
    assert "replace it with the manifest itself" in str(caught.value)
    (tmp_path / "fifo").mkdir()
    fifo = tmp_path / "fifo" / "plugin.toml"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError, match=r"plugin\.toml: must be a regular file"):
        read_manifest_data(fifo)


def test_a_manifest_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plugin.toml"
    path.write_bytes(b"# " + b"x" * MAX_MANIFEST_BYTES + b"\n")
    with pytest.raises(ManifestError, match="more than the limit"):
        read_manifest_data(path)
    path.write_text('name = "ok"\n', encoding="utf-8")
    assert read_manifest_data(path) == {"name": "ok"}
