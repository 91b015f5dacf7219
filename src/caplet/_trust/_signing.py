"""Publisher signatures over a plugin's digest: Ed25519 in minisign's file formats.

A publisher signs the plugin's canonical digest (the ``sha256-<hex>`` text
of :func:`caplet._trust._hashing.tree_hash`, as ASCII bytes, no newline)
and ships the signature as ``plugin.minisig`` in the plugin folder; that one
file is left out of the tree hash (it cannot be part of what it signs). The
files are minisign's (https://jedisct1.github.io/minisign/), so the
reference tool can make and check them::

    printf %s "$DIGEST" > digest.txt
    minisign -Sm digest.txt -x plugins/hello/plugin.minisig     # sign
    minisign -Vm digest.txt -x plugins/hello/plugin.minisig -p key.pub

Formats (all binary fields base64, integers little-endian):

* public key: ``untrusted comment: ...`` then ``"Ed" || key_id[8] || pk[32]``;
* secret key: ``"Ed" || kdf[2] || "B2" || salt[32] || opslimit[8] ||
  memlimit[8] || (key_id[8] || sk[64] || checksum[32])``, the last part
  XORed with scrypt(password) when kdf is ``"Sc"`` and stored as is when it
  is ``"\\0\\0"`` (``minisign -W``); ``checksum = BLAKE2b-256("Ed" || key_id
  || sk)``; ``sk`` is libsodium's seed || public key;
* signature: ``untrusted comment: ...``, ``alg[2] || key_id[8] || sig[64]``,
  ``trusted comment: ...``, ``global_sig[64]``. With ``"ED"`` (minisign's
  default since 0.8) ``sig`` signs BLAKE2b-512 of the message, with ``"Ed"``
  (legacy) the message itself; ``global_sig`` signs ``sig || trusted
  comment``, so the trusted comment cannot be altered either.

Ed25519 comes from ``cryptography`` (imported only when a key is used: it
costs ~150 ms, and every CLI command reads signature statuses); BLAKE2b and
scrypt from :mod:`hashlib`.
Only the container format is written here, because no maintained Python
package reads and writes minisign files on top of ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from caplet._atomic import read_regular
from caplet._errors import SignatureError
from caplet._trust._hashing import SIGNATURE_FILE

__all__ = [
    "SIGNATURE_FILE",
    "PublicKey",
    "SecretKey",
    "Signature",
    "SignatureCheck",
    "SignatureStatus",
    "check_plugin_signature",
    "generate_keypair",
    "is_encrypted_secret_key",
    "parse_public_key",
    "parse_secret_key",
    "parse_signature",
    "sign_digest",
    "verify_signature",
]


_ALG_ED = b"Ed"  # signature over the raw message (minisign -l), and the key algorithm
_ALG_HASHED = b"ED"  # signature over BLAKE2b-512(message)
_KDF_NONE = b"\0\0"
_KDF_SCRYPT = b"Sc"
_CHECKSUM_B2 = b"B2"
_UNTRUSTED = "untrusted comment: "
_TRUSTED = "trusted comment: "
_KEYNUM_LEN = 8 + 64 + 32
_SECRET_LEN = 2 + 2 + 2 + 32 + 8 + 8 + _KEYNUM_LEN
#: Signature, key and comment files are tiny; anything larger is refused unread.
_MAX_FILE_BYTES = 64 * 1024
#: scrypt memory allowed when decrypting a key: minisign's default parameters
#: (opslimit 2^25, memlimit 2^30) need 1 GiB.
_MAX_SCRYPT_MEMORY = 2**31 - 1


class SignatureStatus(enum.Enum):
    """What the signature of a plugin says about its digest.

    ``VALID``: signed by a trusted key and it verifies; ``UNTRUSTED_KEY``: a
    well-formed signature by a key nobody trusted (as good as unsigned);
    ``INVALID``: malformed, or it does not verify (tampered content or a
    forged signature); ``MISSING``: no signature file.
    """

    VALID = "valid"
    UNTRUSTED_KEY = "untrusted-key"
    INVALID = "invalid"
    MISSING = "missing"


def _key_id_text(key_id: bytes) -> str:
    """minisign prints the 8-byte key id as a little-endian 64-bit number in hex."""
    return key_id[::-1].hex().upper()


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An Ed25519 public key with its minisign key id (``key_id_hex`` is how minisign shows it)."""

    key_id: bytes
    key: bytes

    @property
    def key_id_hex(self) -> str:
        return _key_id_text(self.key_id)

    @property
    def base64(self) -> str:
        """The one-line form (``minisign -P``)."""
        return base64.b64encode(_ALG_ED + self.key_id + self.key).decode("ascii")

    def file_text(self) -> str:
        """The public key file minisign writes (``minisign.pub``)."""
        return f"{_UNTRUSTED}minisign public key {self.key_id_hex}\n{self.base64}\n"


@dataclass(frozen=True, slots=True)
class SecretKey:
    """An Ed25519 signing key (the 32-byte seed) with its key id; never printed."""

    key_id: bytes
    seed: bytes = field(repr=False)

    @property
    def public_key(self) -> PublicKey:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        private = Ed25519PrivateKey.from_private_bytes(self.seed)
        raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return PublicKey(key_id=self.key_id, key=raw)

    def file_text(self) -> str:
        """An unencrypted minisign secret key file (as ``minisign -G -W`` writes)."""
        sk = self.seed + self.public_key.key
        checksum = hashlib.blake2b(_ALG_ED + self.key_id + sk, digest_size=32).digest()
        raw = (
            _ALG_ED
            + _KDF_NONE
            + _CHECKSUM_B2
            + bytes(32)
            + bytes(8)
            + bytes(8)
            + self.key_id
            + sk
            + checksum
        )
        encoded = base64.b64encode(raw).decode("ascii")
        return f"{_UNTRUSTED}caplet secret key (unencrypted; keep it private)\n{encoded}\n"


@dataclass(frozen=True, slots=True)
class Signature:
    """A parsed ``.minisig`` file."""

    algorithm: bytes
    key_id: bytes
    signature: bytes
    trusted_comment: str
    global_signature: bytes
    untrusted_comment: str = ""

    @property
    def key_id_hex(self) -> str:
        return _key_id_text(self.key_id)


def generate_keypair() -> SecretKey:
    """A fresh signing key with a random key id (as ``minisign -G``)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return SecretKey(key_id=secrets.token_bytes(8), seed=seed)


# -- parsing ----------------------------------------------------------------------------------


def _b64(text: str, what: str, length: int | None = None) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureError(f"{what} is not valid base64 ({exc})") from exc
    if length is not None and len(raw) != length:
        raise SignatureError(f"{what} decodes to {len(raw)} bytes, expected {length}")
    return raw


def _lines(text: str, what: str) -> list[str]:
    if len(text) > _MAX_FILE_BYTES:
        raise SignatureError(f"{what} is larger than {_MAX_FILE_BYTES} bytes")
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()]


def parse_public_key(text: str) -> PublicKey:
    """A minisign public key: the file (comment line + base64 line) or the bare base64 line."""
    lines = _lines(text, "the public key")
    if lines and lines[0].startswith(_UNTRUSTED):
        lines = lines[1:]
    if len(lines) != 1:
        raise SignatureError(
            "a public key is one base64 line (optionally after an 'untrusted comment:' line), "
            f"found {len(lines)} lines"
        )
    raw = _b64(lines[0], "the public key", 42)
    if raw[:2] != _ALG_ED:
        raise SignatureError(f"the public key has algorithm {raw[:2]!r}, expected b'Ed'")
    return PublicKey(key_id=raw[2:10], key=raw[10:])


def _libsodium_scrypt_params(opslimit: int, memlimit: int) -> tuple[int, int, int]:
    """(log2 N, r, p) as libsodium's crypto_pwhash_scryptsalsa208sha256 derives them.

    minisign stores only opslimit and memlimit; this mirrors libsodium's
    ``pickparams`` (crypto_pwhash/scryptsalsa208sha256/pwhash_scryptsalsa208sha256.c)
    so that keys made by minisign decrypt here.
    """
    opslimit = max(opslimit, 32768)
    r = 8
    if opslimit < memlimit // 32:
        p = 1
        max_n = opslimit // (r * 4)
    else:
        max_n = memlimit // (r * 128)
    n_log2 = 1
    while n_log2 < 63 and (1 << n_log2) <= max_n // 2:
        n_log2 += 1
    if opslimit >= memlimit // 32:
        max_rp = min((opslimit // 4) // (1 << n_log2), 0x3FFFFFFF)
        p = max_rp // r
    return n_log2, r, p


def is_encrypted_secret_key(text: str) -> bool:
    """True when *text* is a minisign secret key protected by a password (``minisign -G``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    try:
        raw = base64.b64decode(lines[-1].strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw[2:4] == _KDF_SCRYPT


def parse_secret_key(text: str, password: bytes | None = None) -> SecretKey:
    """A minisign secret key file; an encrypted one needs its *password*.

    The checksum and the embedded public key are checked, so a wrong
    password or a damaged file is an error, never a wrong key.
    """
    lines = _lines(text, "the secret key")
    if lines and lines[0].startswith(_UNTRUSTED):
        lines = lines[1:]
    if len(lines) != 1:
        raise SignatureError("a secret key file is a comment line and one base64 line")
    raw = _b64(lines[0], "the secret key", _SECRET_LEN)
    if raw[:2] != _ALG_ED or raw[4:6] != _CHECKSUM_B2:
        raise SignatureError("the secret key is not a minisign Ed25519 key with a BLAKE2b checksum")
    kdf = raw[2:4]
    salt = raw[6:38]
    opslimit = int.from_bytes(raw[38:46], "little")
    memlimit = int.from_bytes(raw[46:54], "little")
    keynum = raw[54:]
    if kdf == _KDF_SCRYPT:
        if password is None:
            raise SignatureError(
                "the secret key is encrypted; give its password "
                "(--password-env NAME, or answer the prompt)"
            )
        n_log2, r, p = _libsodium_scrypt_params(opslimit, memlimit)
        try:
            stream = hashlib.scrypt(
                password,
                salt=salt,
                n=1 << n_log2,
                r=r,
                p=p,
                maxmem=_MAX_SCRYPT_MEMORY,
                dklen=_KEYNUM_LEN,
            )
        except (ValueError, MemoryError) as exc:
            raise SignatureError(
                f"cannot derive the key's encryption key (scrypt N=2^{n_log2}, r={r}, p={p}): {exc}"
            ) from exc
        keynum = bytes(a ^ b for a, b in zip(keynum, stream, strict=True))
    elif kdf != _KDF_NONE:
        raise SignatureError(f"the secret key uses an unknown key derivation {kdf!r}")
    key_id, sk, checksum = keynum[:8], keynum[8:72], keynum[72:]
    expected = hashlib.blake2b(_ALG_ED + key_id + sk, digest_size=32).digest()
    # minisign 0.11 writes a zero checksum for unencrypted keys (-W).
    if checksum != expected and not (kdf == _KDF_NONE and checksum == bytes(32)):
        if kdf == _KDF_SCRYPT:
            raise SignatureError("wrong password for the secret key (its checksum does not match)")
        raise SignatureError("the secret key is damaged (its checksum does not match)")
    secret = SecretKey(key_id=key_id, seed=sk[:32])
    if secret.public_key.key != sk[32:]:
        raise SignatureError("the secret key is damaged (its public half does not match)")
    return secret


def parse_signature(text: str) -> Signature:
    """A ``.minisig`` file: four lines (untrusted comment, signature, trusted comment, global)."""
    lines = _lines(text, "the signature")
    if len(lines) != 4:
        raise SignatureError(
            f"a minisign signature has 4 lines (untrusted comment, signature, trusted "
            f"comment, global signature), found {len(lines)}"
        )
    if not lines[0].startswith(_UNTRUSTED):
        raise SignatureError("the signature's first line is not an 'untrusted comment:' line")
    if not lines[2].startswith(_TRUSTED):
        raise SignatureError("the signature's third line is not a 'trusted comment:' line")
    raw = _b64(lines[1], "the signature", 74)
    if raw[:2] not in (_ALG_ED, _ALG_HASHED):
        raise SignatureError(f"the signature has algorithm {raw[:2]!r}, expected b'ED' or b'Ed'")
    return Signature(
        algorithm=raw[:2],
        key_id=raw[2:10],
        signature=raw[10:],
        trusted_comment=lines[2][len(_TRUSTED) :],
        global_signature=_b64(lines[3], "the global signature", 64),
        untrusted_comment=lines[0][len(_UNTRUSTED) :],
    )


# -- signing and verifying ----------------------------------------------------------------------


def sign_digest(secret: SecretKey, digest: str, *, trusted_comment: str) -> str:
    """The ``.minisig`` text signing *digest* (prehashed ``ED``, minisign's default)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if "\n" in trusted_comment or "\r" in trusted_comment:
        raise SignatureError("a trusted comment is one line")
    private = Ed25519PrivateKey.from_private_bytes(secret.seed)
    message = hashlib.blake2b(digest.encode("ascii"), digest_size=64).digest()
    signature = private.sign(message)
    global_signature = private.sign(signature + trusted_comment.encode("utf-8"))
    line = base64.b64encode(_ALG_HASHED + secret.key_id + signature).decode("ascii")
    return (
        f"{_UNTRUSTED}signature from caplet secret key {_key_id_text(secret.key_id)}\n"
        f"{line}\n{_TRUSTED}{trusted_comment}\n"
        f"{base64.b64encode(global_signature).decode('ascii')}\n"
    )


def verify_signature(signature: Signature, key: PublicKey, message: bytes) -> None:
    """Raise :class:`SignatureError` unless *signature* by *key* covers *message*."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if signature.key_id != key.key_id:
        raise SignatureError(
            f"the signature was made with key {signature.key_id_hex}, not {key.key_id_hex}"
        )
    verifier = Ed25519PublicKey.from_public_bytes(key.key)
    signed = (
        hashlib.blake2b(message, digest_size=64).digest()
        if signature.algorithm == _ALG_HASHED
        else message
    )
    try:
        verifier.verify(signature.signature, signed)
    except InvalidSignature:
        raise SignatureError(
            f"the signature by key {key.key_id_hex} does not match the content "
            "(the plugin changed after it was signed, or the signature is forged)"
        ) from None
    try:
        verifier.verify(
            signature.global_signature,
            signature.signature + signature.trusted_comment.encode("utf-8"),
        )
    except InvalidSignature:
        raise SignatureError(
            f"the trusted comment of the signature by key {key.key_id_hex} was altered"
        ) from None


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """The outcome of checking one plugin's signature: status, signer and why."""

    status: SignatureStatus
    key_id: str | None = None
    detail: str = ""
    trusted_comment: str = ""


def check_plugin_signature(
    plugin_dir: Path, digest: str, trusted: Mapping[str, PublicKey]
) -> SignatureCheck:
    """Check ``plugin.minisig`` of *plugin_dir* against *digest* and the *trusted* keys.

    *trusted* maps minisign key ids (``key_id_hex``) to keys. Never raises for
    a bad signature: a malformed or failing one is ``INVALID`` with the
    reason, because a bad signature must lower trust, not hide the plugin.
    """
    path = plugin_dir / SIGNATURE_FILE
    try:
        raw = read_regular(path, _MAX_FILE_BYTES)
    except FileNotFoundError:
        return SignatureCheck(SignatureStatus.MISSING, detail=f"no {SIGNATURE_FILE}")
    except OSError as exc:
        return SignatureCheck(
            SignatureStatus.INVALID, detail=f"{path} cannot be read ({exc.strerror})"
        )
    try:
        signature = parse_signature(raw.decode("utf-8"))
    except (SignatureError, UnicodeDecodeError) as exc:
        return SignatureCheck(SignatureStatus.INVALID, detail=f"{path}: {exc}")
    key = trusted.get(signature.key_id_hex)
    if key is None:
        return SignatureCheck(
            SignatureStatus.UNTRUSTED_KEY,
            key_id=signature.key_id_hex,
            detail=f"signed by key {signature.key_id_hex}, which is not trusted "
            f"(trust it with `caplet trust add KEY` if it is the publisher's)",
            trusted_comment=signature.trusted_comment,
        )
    try:
        verify_signature(signature, key, digest.encode("ascii"))
    except SignatureError as exc:
        return SignatureCheck(
            SignatureStatus.INVALID,
            key_id=signature.key_id_hex,
            detail=str(exc),
            trusted_comment=signature.trusted_comment,
        )
    return SignatureCheck(
        SignatureStatus.VALID,
        key_id=signature.key_id_hex,
        detail=f"signed by trusted key {signature.key_id_hex}",
        trusted_comment=signature.trusted_comment,
    )
