"""The publisher keys this user trusts, one minisign public key file each.

They live in ``<state dir>/trusted-keys/<KEY ID>.pub`` (the state directory
is private to the user, :mod:`caplet._trust._paths`), in minisign's own
format so that a key can be inspected with ``cat`` or handed to
``minisign -V -p``. Files rather than a table in ``caplet.db``: a key is one
small document that is added and removed whole, and an administrator can
provision the folder with plain file tools. Writes are atomic.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from caplet._atomic import NotRegularFileError, atomic_write, fsync_directory, read_regular
from caplet._errors import SignatureError, StoreError
from caplet._trust._paths import ensure_private_dir
from caplet._trust._signing import PublicKey, parse_public_key

__all__ = ["KEYRING_DIR", "Keyring"]

KEYRING_DIR = "trusted-keys"

_KEY_ID_RE = re.compile(r"[0-9A-F]{16}")
_MAX_KEY_BYTES = 4096


class Keyring:
    """The trusted publisher keys in one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = state_dir / KEYRING_DIR

    def _path(self, key_id: str) -> Path:
        return self.directory / f"{key_id}.pub"

    def add(self, key: PublicKey) -> bool:
        """Trust *key*; False when it was already trusted."""
        ensure_private_dir(self.directory)
        path = self._path(key.key_id_hex)
        try:
            existed = path.exists()
            atomic_write(path, key.file_text().encode("ascii"), mode=0o600)
        except OSError as exc:
            raise StoreError(
                f"cannot write the trusted key {path} ({exc.strerror}); check the free space "
                "and the permissions of the state directory"
            ) from exc
        return not existed

    def remove(self, key_id: str) -> bool:
        """Stop trusting the key with this id; False when it was not trusted."""
        given, key_id = key_id, key_id.strip().upper()
        if not _KEY_ID_RE.fullmatch(key_id):
            raise SignatureError(
                f"{given!r} is not a key id (16 hex digits, as `caplet trust list` shows)"
            )
        path = self._path(key_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError(
                f"cannot remove the trusted key {path} ({exc.strerror}); remove it by hand"
            ) from exc
        with contextlib.suppress(OSError):
            fsync_directory(self.directory)
        return True

    def keys(self) -> dict[str, PublicKey]:
        """Every trusted key by key id, in key id order.

        A file that is not a valid key, or whose name is not its key id, is
        an error naming it: a keyring that silently skipped a damaged entry
        would make a signed plugin look unsigned for no visible reason.
        """
        try:
            if not self.directory.is_dir():
                return {}
            entries = sorted(self.directory.iterdir())
        except OSError as exc:  # a state directory whose name is too long, or unreadable
            raise StoreError(
                f"the trusted keys in {self.directory} cannot be listed ({exc.strerror}); check "
                "the state directory (--state-dir or CAPLET_STATE_DIR) and its permissions"
            ) from exc
        found: dict[str, PublicKey] = {}
        for path in entries:
            if path.name.startswith("."):
                continue  # an atomic write's temporary file
            fix = f"remove it (caplet trust remove {path.stem}) and add the key again"
            if path.suffix != ".pub" or not _KEY_ID_RE.fullmatch(path.stem):
                raise StoreError(
                    f"trusted key file {path} is not named <KEY ID>.pub; remove it or rename it"
                )
            try:
                text = read_regular(path, _MAX_KEY_BYTES)[:_MAX_KEY_BYTES].decode("ascii")
                key = parse_public_key(text)
            except NotRegularFileError:
                raise StoreError(f"trusted key file {path} is not a regular file; {fix}") from None
            except (OSError, UnicodeDecodeError, SignatureError) as exc:
                raise StoreError(f"trusted key file {path} cannot be used ({exc}); {fix}") from exc
            if key.key_id_hex != path.stem:
                raise StoreError(
                    f"trusted key file {path} holds key {key.key_id_hex}, not {path.stem}; {fix}"
                )
            found[key.key_id_hex] = key
        return found
