"""Trusted publisher keys, one minisign public key file each in the state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._errors import SignatureError, StoreError
from caplet._trust._keyring import KEYRING_DIR, Keyring
from caplet._trust._signing import generate_keypair


def test_add_list_remove(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "state")
    assert ring.keys() == {}
    key = generate_keypair().public_key
    assert ring.add(key) is True
    assert ring.add(key) is False, "adding twice reports it was already trusted"
    assert ring.keys() == {key.key_id_hex: key}
    path = tmp_path / "state" / KEYRING_DIR / f"{key.key_id_hex}.pub"
    assert path.read_text() == key.file_text(), "minisign's own public key format"
    assert path.stat().st_mode & 0o777 == 0o600
    assert ring.remove(key.key_id_hex.lower()) is True
    assert ring.remove(key.key_id_hex) is False
    assert ring.keys() == {}


def test_a_bad_key_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SignatureError, match="'nope' is not a key id"):
        Keyring(tmp_path).remove("nope")


def test_a_damaged_key_file_is_an_error_naming_it(tmp_path: Path) -> None:
    ring = Keyring(tmp_path)
    key = generate_keypair().public_key
    ring.add(key)
    path = tmp_path / KEYRING_DIR / f"{key.key_id_hex}.pub"
    path.write_text("untrusted comment: x\nAAAA\n")
    with pytest.raises(StoreError) as info:
        ring.keys()
    assert str(path) in str(info.value)
    assert f"caplet trust remove {key.key_id_hex}" in str(info.value)


def test_a_key_under_another_id_is_refused(tmp_path: Path) -> None:
    ring = Keyring(tmp_path)
    key = generate_keypair().public_key
    (tmp_path / KEYRING_DIR).mkdir()
    (tmp_path / KEYRING_DIR / "0000000000000000.pub").write_text(key.file_text())
    with pytest.raises(StoreError, match=f"holds key {key.key_id_hex}, not 0000000000000000"):
        ring.keys()


def test_a_state_directory_the_system_cannot_take_is_a_store_error(tmp_path: Path) -> None:
    """A name longer than the file system's limit made is_dir() raise OSError (issue 13)."""
    keyring = Keyring(tmp_path / ("n" * 300))
    with pytest.raises(StoreError) as caught:
        keyring.keys()
    assert str(caught.value).startswith(f"the trusted keys in {tmp_path / ('n' * 300)}")
    assert "cannot be listed (File name too long); check the state directory" in str(caught.value)
    assert isinstance(caught.value.__cause__, OSError)
