"""Commands of signatures and trusted publisher keys: keygen, sign, trust add/list/remove."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from caplet._atomic import atomic_write
from caplet._cli._arguments import usable_path
from caplet._cli._command import EXIT_REFUSED, Run, SuggestingGroup, app, command
from caplet._cli._documents import JSONValue
from caplet._cli._options import Common, Name
from caplet._cli._safe import plain
from caplet._errors import SignatureError
from caplet._trust._hashing import SIGNATURE_FILE
from caplet._trust._keyring import Keyring
from caplet._trust._paths import default_state_dir
from caplet._trust._signing import (
    PublicKey,
    generate_keypair,
    is_encrypted_secret_key,
    parse_public_key,
    parse_secret_key,
    sign_digest,
)

__all__: list[str] = []


@command("keygen", common=Common.JSON)
def keygen_command(
    run: Run,
    *,
    prefix: Annotated[
        Path,
        typer.Argument(help="Writes PREFIX.key (private) and PREFIX.pub.", callback=usable_path),
    ],
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Create a minisign-compatible Ed25519 key pair for signing plugins (unencrypted, 0600)."""
    if not prefix.name:
        raise SignatureError(
            f"PREFIX {str(prefix)!r} names no file; pass a path such as keys/publisher"
        )
    secret_path = prefix.with_name(prefix.name + ".key")
    public_path = prefix.with_name(prefix.name + ".pub")
    secret = generate_keypair()
    try:
        for path in (secret_path, public_path):
            if path.exists() and not force:
                raise SignatureError(f"{path} exists; pass --force to overwrite it")
        atomic_write(secret_path, secret.file_text().encode("ascii"), mode=0o600)
        atomic_write(public_path, secret.public_key.file_text().encode("ascii"), mode=0o644)
    except OSError as exc:
        raise SignatureError(
            f"cannot write the key pair at {prefix} ({exc.strerror}); check that its "
            "directory exists and is writable, or choose another PREFIX"
        ) from exc
    key = secret.public_key
    run.out.emit(
        {
            "ok": True,
            "key_id": key.key_id_hex,
            "public_key": key.base64,
            "secret_key_file": str(secret_path),
            "public_key_file": str(public_path),
        }
    )
    run.out.say(
        plain(f"key {key.key_id_hex}: secret {secret_path} (keep it private), public {public_path}")
    )


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise SignatureError(
            f"cannot read the {what} {path} ({exc}); pass the path of a readable "
            f"minisign {what} file"
        ) from exc


@command("sign", common=Common.DIRS)
def sign_command(
    run: Run,
    *,
    name: Name,
    key: Annotated[
        Path, typer.Option("--key", help="A minisign secret key file.", callback=usable_path)
    ],
    password_env: Annotated[
        str | None,
        typer.Option("--password-env", help="Read an encrypted key's password from this variable."),
    ] = None,
) -> None:
    """Sign a plugin's digest; writes plugin.minisig into its folder (minisign-compatible)."""
    host = run.host(locked=False)
    info = host.manager.require_plugin(name)
    text = _read_text(key, "secret key")
    password: bytes | None = None
    if is_encrypted_secret_key(text):
        if password_env is not None:
            value = os.environ.get(password_env)
            if value is None:
                raise SignatureError(
                    f"--password-env {password_env}: that variable is not set; set it "
                    "to the secret key's password, or omit --password-env in a terminal to be "
                    "prompted"
                )
            password = value.encode("utf-8")
        elif sys.stdin.isatty():
            password = typer.prompt("Password", hide_input=True).encode("utf-8")
        else:
            run.usage(f"{key} is encrypted; pass --password-env NAME")
    try:
        secret = parse_secret_key(text, password)
    except SignatureError as exc:
        raise SignatureError(f"secret key {key}: {exc}") from exc
    digest = host.manager.current_hash(name)
    signature = sign_digest(
        secret,
        digest,
        trusted_comment=f"caplet plugin {name} {info.version} {digest}",
    )
    target = info.path / SIGNATURE_FILE
    try:
        atomic_write(target, signature.encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise SignatureError(
            f"cannot write {target} ({exc.strerror}); make the folder of plugin {name!r} writable"
        ) from exc
    key_id = secret.public_key.key_id_hex
    host.manager.log_decision(name, "sign", digest, True, f"key {key_id}")
    run.out.emit(
        {"ok": True, "name": name, "digest": digest, "key_id": key_id, "file": str(target)}
    )
    run.out.say(plain(f"signed {name} {info.version} ({digest}) with key {key_id}: {target}"))


trust_app = typer.Typer(
    cls=SuggestingGroup,
    name="trust",
    help="The publisher keys whose signatures make a plugin trusted.",
    no_args_is_help=True,
)
app.add_typer(trust_app)

_KEYRING = Common.STATE_DIR | Common.JSON


def _keyring(run: Run) -> Keyring:
    state_dir = run.options.state_dir
    return Keyring(state_dir if state_dir is not None else default_state_dir())


def _key_json(key: PublicKey) -> JSONValue:
    return {"key_id": key.key_id_hex, "public_key": key.base64}


@command("add", group=trust_app, common=_KEYRING)
def trust_add_command(
    run: Run,
    *,
    key: Annotated[str, typer.Argument(help="A minisign public key file, or its base64 line.")],
) -> None:
    """Trust a publisher key: plugins it signs become trusted (where the policy allows)."""
    path = Path(key)
    try:
        text = path.read_text(encoding="ascii") if path.is_file() else key
        public = parse_public_key(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise SignatureError(
            f"cannot read the public key {key} ({exc}); pass a readable .pub file "
            "or its base64 line"
        ) from exc
    except SignatureError as exc:
        raise SignatureError(
            f"{key!r} is not a minisign public key ({exc}); pass the .pub file or its base64 line"
        ) from exc
    added = _keyring(run).add(public)
    run.out.emit(
        {"ok": True, "added": added, "key_id": public.key_id_hex, "public_key": public.base64}
    )
    run.out.say(f"{'trusted' if added else 'already trusted'}: key {public.key_id_hex}")


@command("list", group=trust_app, common=_KEYRING)
def trust_list_command(run: Run) -> None:
    """List the trusted publisher keys."""
    keys = _keyring(run).keys()
    run.out.emit({"ok": True, "keys": [_key_json(k) for k in keys.values()]})
    if not keys:
        run.out.say("no trusted keys; add one with `caplet trust add KEY`")
    for key in keys.values():
        run.out.say(f"{key.key_id_hex}  {key.base64}")


@command("remove", group=trust_app, common=_KEYRING)
def trust_remove_command(
    run: Run,
    *,
    key_id: Annotated[str, typer.Argument(help="The key id, as `caplet trust list` shows it.")],
) -> None:
    """Stop trusting a publisher key (its plugins fall back to community)."""
    removed = _keyring(run).remove(key_id)
    run.out.emit({"ok": removed, "key_id": key_id.upper()}, failure=f"key {key_id} is not trusted")
    if not removed:
        run.out.err.print(plain(f"refused: key {key_id} is not trusted"))
        raise typer.Exit(EXIT_REFUSED)
    run.out.say(plain(f"removed key {key_id.upper()}"))
