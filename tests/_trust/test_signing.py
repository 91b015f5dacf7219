"""Signatures over a plugin's digest in minisign's formats, checked against real minisign output."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import pytest

from caplet._errors import SignatureError
from caplet._trust._hashing import tree_hash
from caplet._trust._signing import (
    SIGNATURE_FILE,
    PublicKey,
    SecretKey,
    SignatureStatus,
    check_plugin_signature,
    generate_keypair,
    is_encrypted_secret_key,
    parse_public_key,
    parse_secret_key,
    parse_signature,
    sign_digest,
    verify_signature,
)

# Made once with minisign 0.11 (`minisign -G -W`, then `minisign -S -t` and
# `minisign -S -l -t`) over MESSAGE: caplet must read what the reference tool
# writes, byte for byte.
MINISIGN_PUBLIC = """untrusted comment: minisign public key 7A4CB98A0C9ED25C
RWRc0p4MirlMenv0iYDrTT9/1NvG88W6J18+X0hOR18/fUsXhZSR6SJV
"""
MINISIGN_SECRET = """untrusted comment: minisign encrypted secret key
RWQAAEIyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAXNKeDIq5THpXrI10ef9qAuo0FGGoJB2cEWR58gU+WpG7bCw78TjwrXv0iYDrTT9/1NvG88W6J18+X0hOR18/fUsXhZSR6SJVAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
"""
MINISIGN_PREHASHED = """untrusted comment: signature from minisign secret key
RURc0p4MirlMevZ8+xJ2hcbg0C9Z48F2NT2YqqZWj6CH39EWFhkmQbof5U2mP6Hp23uFHKU4Z+gFjk/rHRD2ztkb4+9ZaX10UwU=
trusted comment: plugin:hello
Z0fCOOSbMHguj33uN4GFUYSdmwAvgSLk9E/Hb7KvG9qLU99q1jwb+Lf9oleDsSNAJQn/NNBJol7K1xeg7CAxCQ==
"""
MINISIGN_LEGACY = """untrusted comment: signature from minisign secret key
RWRc0p4MirlMeuN0O5TXhJfcsP6CmXMnlDlds0Q7qE2td1mQhtblqWQVMM+rmeBXAp+36T1tWsGwrwhdA2z/WTwsY3ktAWwrjAk=
trusted comment: legacy
CmgrY0EaiY5vPbER0JF86OzfwU6vcxb2RXnn3x9Re8qknLnwYQ5Z5m10Cn1fv3hH0NsZDmMTRxcA0yuGLiNVBw==
"""
MESSAGE = b"sha256-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"


def encrypted_key_text(secret: SecretKey, password: bytes) -> str:
    """An ``Sc`` (scrypt) encrypted key as minisign writes it, with libsodium's cheap
    "interactive" limits (opslimit 2^19, memlimit 2^24: N=2^14, r=8, p=1) so the test is fast."""
    key_id = secret.key_id
    sk = secret.seed + secret.public_key.key
    checksum = hashlib.blake2b(b"Ed" + key_id + sk, digest_size=32).digest()
    salt = secrets.token_bytes(32)
    stream = hashlib.scrypt(password, salt=salt, n=1 << 14, r=8, p=1, dklen=104)
    keynum = bytes(a ^ b for a, b in zip(key_id + sk + checksum, stream, strict=True))
    raw = (
        b"EdScB2"
        + salt
        + (1 << 19).to_bytes(8, "little")
        + (1 << 24).to_bytes(8, "little")
        + keynum
    )
    return "untrusted comment: test key\n" + base64.b64encode(raw).decode() + "\n"


def test_reads_minisign_public_key_and_shows_its_key_id() -> None:
    key = parse_public_key(MINISIGN_PUBLIC)
    assert key.key_id_hex == "7A4CB98A0C9ED25C"
    assert key.file_text() == MINISIGN_PUBLIC
    assert parse_public_key(key.base64) == key, "the bare base64 line (minisign -P) works too"


@pytest.mark.parametrize("text", [MINISIGN_PREHASHED, MINISIGN_LEGACY])
def test_verifies_signatures_made_by_minisign(text: str) -> None:
    key = parse_public_key(MINISIGN_PUBLIC)
    signature = parse_signature(text)
    verify_signature(signature, key, MESSAGE)
    with pytest.raises(SignatureError, match="does not match the content"):
        verify_signature(signature, key, MESSAGE + b"0")


def test_an_altered_trusted_comment_is_detected() -> None:
    key = parse_public_key(MINISIGN_PUBLIC)
    forged = MINISIGN_PREHASHED.replace("plugin:hello", "plugin:other")
    with pytest.raises(SignatureError, match=r"trusted comment .* was altered"):
        verify_signature(parse_signature(forged), key, MESSAGE)


def test_a_signature_by_another_key_is_refused() -> None:
    other = generate_keypair().public_key
    with pytest.raises(SignatureError, match="made with key 7A4CB98A0C9ED25C, not"):
        verify_signature(parse_signature(MINISIGN_PREHASHED), other, MESSAGE)


def test_reads_minisign_unencrypted_secret_key_and_signs_like_minisign() -> None:
    secret = parse_secret_key(MINISIGN_SECRET)
    assert secret.public_key == parse_public_key(MINISIGN_PUBLIC)
    assert "seed" not in repr(secret), "the secret never shows up in a log"
    text = sign_digest(secret, MESSAGE.decode(), trusted_comment="caplet plugin hello")
    signature = parse_signature(text)
    assert signature.algorithm == b"ED"
    assert signature.trusted_comment == "caplet plugin hello"
    verify_signature(signature, secret.public_key, MESSAGE)


def test_generated_keys_round_trip_through_their_files() -> None:
    secret = generate_keypair()
    again = parse_secret_key(secret.file_text())
    assert again == secret
    assert parse_public_key(secret.public_key.file_text()) == secret.public_key
    assert not is_encrypted_secret_key(secret.file_text())


def test_encrypted_secret_key_needs_the_right_password() -> None:
    secret = generate_keypair()
    text = encrypted_key_text(secret, b"correct horse")
    assert is_encrypted_secret_key(text)
    with pytest.raises(SignatureError, match="the secret key is encrypted; give its password"):
        parse_secret_key(text)
    with pytest.raises(SignatureError, match="wrong password for the secret key"):
        parse_secret_key(text, b"wrong")
    assert parse_secret_key(text, b"correct horse") == secret


def test_damaged_secret_key_is_refused() -> None:
    raw = bytearray(base64.b64decode(MINISIGN_SECRET.splitlines()[1]))
    raw[70] ^= 1  # a bit of the secret seed (key_id is bytes 54-61)
    text = "untrusted comment: x\n" + base64.b64encode(bytes(raw)).decode()
    with pytest.raises(SignatureError, match="the secret key is damaged"):
        parse_secret_key(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("untrusted comment: x\nnot base64!\ntrusted comment: y\nAAAA\n", "not valid base64"),
        ("untrusted comment: x\nAAAA\n", "has 4 lines"),
        (MINISIGN_PREHASHED.replace("\ntrusted comment:", "\ntrusted: "), "third line"),
        (MINISIGN_PREHASHED.replace("untrusted comment:", "comment:"), "first line"),
    ],
)
def test_malformed_signatures_are_refused(text: str, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        parse_signature(text)


def test_public_key_errors() -> None:
    with pytest.raises(SignatureError, match="decodes to 3 bytes, expected 42"):
        parse_public_key("AAAA")
    with pytest.raises(SignatureError, match="found 2 lines"):
        parse_public_key("AAAA\nBBBB\n")


# -- plugin signatures ------------------------------------------------------------------


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    directory = tmp_path / "hello"
    directory.mkdir()
    (directory / "plugin.py").write_text("x = 1\n")
    return directory


def sign(plugin: Path, secret: SecretKey) -> str:
    digest = tree_hash(plugin)
    text = sign_digest(secret, digest, trusted_comment=f"caplet plugin hello {digest}")
    (plugin / SIGNATURE_FILE).write_text(text)
    return digest


def test_the_signature_file_is_left_out_of_the_tree_hash(plugin: Path) -> None:
    before = tree_hash(plugin)
    sign(plugin, generate_keypair())
    assert tree_hash(plugin) == before
    (plugin / "data.txt").write_text("more")
    assert tree_hash(plugin) != before


def test_signature_statuses(plugin: Path) -> None:
    secret = generate_keypair()
    trusted: dict[str, PublicKey] = {secret.public_key.key_id_hex: secret.public_key}
    missing = check_plugin_signature(plugin, tree_hash(plugin), trusted)
    assert missing.status is SignatureStatus.MISSING

    digest = sign(plugin, secret)
    valid = check_plugin_signature(plugin, digest, trusted)
    assert valid.status is SignatureStatus.VALID
    assert valid.key_id == secret.public_key.key_id_hex
    assert valid.trusted_comment == f"caplet plugin hello {digest}"

    unknown = check_plugin_signature(plugin, digest, {})
    assert unknown.status is SignatureStatus.UNTRUSTED_KEY
    assert "which is not trusted" in unknown.detail

    (plugin / "plugin.py").write_text("x = 2\n")
    tampered = check_plugin_signature(plugin, tree_hash(plugin), trusted)
    assert tampered.status is SignatureStatus.INVALID
    assert "does not match the content" in tampered.detail

    (plugin / SIGNATURE_FILE).write_text("garbage\n")
    garbage = check_plugin_signature(plugin, tree_hash(plugin), trusted)
    assert garbage.status is SignatureStatus.INVALID
    assert SIGNATURE_FILE in garbage.detail
