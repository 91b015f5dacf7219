"""An update's new version, staged and checked, and what its old version was allowed.

Split out of :mod:`caplet._host._update` by concern (mend19): this module
stages the new version, validates, scans and audits it (the audit cached under
its digest, as any audit is), checks a pinned signer, and touches nothing
live; the transaction there swaps, journals, checks health and rolls back.
Each check raises :class:`RefusedError`, whose message is the reason the
update reports.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from caplet._atomic import NotRegularFileError, read_regular
from caplet._audit._deep import deep_audit
from caplet._audit._model import AuditResult
from caplet._audit._static import static_audit
from caplet._capabilities._lint import lint_composition
from caplet._errors import PluginTreeError, SignatureError
from caplet._findings import Severity
from caplet._host._consent import Consent
from caplet._host._defaults import template_defaults
from caplet._host._installed import extract_wheel_plugin, find_installed
from caplet._host._plugin_record import plugin_location
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._scan._scanner import scan_tree
from caplet._trust._hashing import SIGNATURE_FILE, tree_hash
from caplet._trust._lockfile import LockEntry
from caplet._trust._signing import SignatureStatus, check_plugin_signature, parse_public_key
from caplet._trust._snapshot import make_snapshot, remove_snapshot
from caplet._trust._store import ApprovedDefaults

if TYPE_CHECKING:
    from caplet._config._prompt import Prompter
    from caplet._host._manager import PluginManager
    from caplet._host._policy import Policy
from caplet._host._records import Outcome

__all__ = [
    "RefusedError",
    "UpdatableHost",
    "approved_before",
    "check_staged",
    "defaults_before",
    "location_of",
    "new_lock_entry",
    "now_utc",
    "stage",
]

_MAX_SIGNATURE_BYTES = 64 * 1024


class UpdatableHost(Protocol):
    """What an update needs of :class:`~caplet.PluginHost` (a Protocol, so this module
    does not import the host that calls it)."""

    @property
    def manager(self) -> PluginManager: ...

    @property
    def policy(self) -> Policy: ...

    def discover(self) -> int: ...

    def enable(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        config: Mapping[str, object] | None = None,
        prompter: Prompter | None = None,
        consent: bool | Consent = False,
    ) -> Outcome: ...

    def disable(self, name: str) -> Outcome: ...

    def check_health(self, name: str, *, timeout_s: float) -> Outcome: ...


class RefusedError(Exception):
    """Internal to updates: a step refused the update (the message is the reason)."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def stage(host: UpdatableHost, name: str, source: str | Path, parent: Path) -> Path:
    """Copy the new version into ``parent/<name>``; returns that folder."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(source)
    if path.is_file() and path.suffix == ".whl":
        return extract_wheel_plugin(path, name, parent)
    origin: Path | None = path if path.is_dir() else None
    if origin is None:
        installed, _ = find_installed(host.manager.dist_path)
        matches = [
            p
            for p in installed
            if p.name == name and _normalise(p.distribution) == _normalise(str(source))
        ]
        if not matches:
            raise RefusedError(
                f"cannot update plugin {name!r} from {str(source)!r}: it is neither a plugin "
                "folder, a wheel (.whl), nor an installed distribution with a "
                f"'caplet.plugins' entry point {name!r}; check the path or distribution name"
            )
        origin = matches[0].directory
    snapshot = make_snapshot(origin, parent, read_only=False)
    target = parent / name
    snapshot.path.rename(target)
    # Opened once, without following a link (a check by name, then an open by
    # name, followed a link swapped in between: attack10's report); a
    # signature that is not a regular file is left behind, as before.
    try:
        data = read_regular(origin / SIGNATURE_FILE, _MAX_SIGNATURE_BYTES)
    except (FileNotFoundError, NotRegularFileError):
        return target
    except OSError as exc:
        raise RefusedError(
            f"cannot update plugin {name!r}: its signature {origin / SIGNATURE_FILE} cannot be "
            f"read ({exc.strerror or exc}); check its permissions or remove it"
        ) from exc
    (target / SIGNATURE_FILE).write_bytes(data[:_MAX_SIGNATURE_BYTES])
    return target


def approved_before(host: UpdatableHost, name: str, entry: LockEntry | None) -> tuple[str, ...]:
    """What the old version was allowed: the lock entry, else the approval, else declared."""
    info = host.manager.require_plugin(name)
    if entry is not None:
        return entry.capabilities
    approval = info.approval
    if approval is not None and approval.content_hash == info.content_hash:
        return approval.capabilities
    return tuple(c.declared for c in info.manifest.capabilities)


def location_of(host: UpdatableHost, name: str) -> str:
    info = host.manager.require_plugin(name)
    return plugin_location(info.source, info.path)


def defaults_before(
    host: UpdatableHost, name: str, entry: LockEntry | None, installed: str
) -> tuple[ApprovedDefaults | None, str]:
    """The defaults the old version was allowed, or None and why they are not known.

    The installed folder is the approved content (its approval, or its lock
    entry, names its digest), so its manifest's defaults are the approved
    ones, whether or not the approval recorded them. A lock entry that pins
    other content leaves them unknown: that content is not on this machine.
    An update carries the approval to every later enable, so defaults are
    compared as they are, whatever this process configured.
    """
    if entry is not None and entry.digest != installed:
        return None, "the lock entry pins other content than the installed one"
    return template_defaults(host.manager.require_plugin(name).manifest), ""


def check_staged(host: UpdatableHost, name: str, staged: Path) -> tuple[Manifest, str, AuditResult]:
    """Validate, hash, scan and audit the staged version (with the configured model, when
    there is one); refuse what enable would refuse.

    The staged copy is an ordinary folder (it becomes the plugin folder users edit), so
    whoever can write the plugins directory can change it while it is read. Hashing it,
    then scanning and having the model read it, pinned the audit to the digest taken
    before the reads: a file changed in between (and back before the swap) stored an audit
    of bytes nobody installs under the digest of bytes nobody audited (steer35). So the
    staged copy is read once, into a private read-only snapshot hashed from the very
    bytes it holds; the manifest, the scan and the model read that snapshot, and the audit
    is stored under its hash. The staged copy must still hash the same afterwards, or the
    update is refused: what would be installed is not what was audited.
    """
    snapshot = make_snapshot(staged, host.manager.run_dir, named=True)
    try:
        manifest, audit = _check_snapshot(host, name, snapshot.path, snapshot.content_hash, staged)
    finally:
        remove_snapshot(snapshot)
    try:
        now = tree_hash(staged)
    except PluginTreeError as exc:
        now = f"unreadable ({exc})"
    if now != snapshot.content_hash:
        raise RefusedError(
            f"the new version of {name!r} changed while it was audited (the files read for "
            f"its audit hash {snapshot.content_hash}, the staged copy {now} now), so it is "
            "not installed: the audit would vouch for other files than the ones installed; "
            "make sure nothing writes the plugins directory during the update, then run "
            f"caplet update {name} again"
        )
    return manifest, snapshot.content_hash, audit


def _check_snapshot(
    host: UpdatableHost, name: str, root: Path, digest: str, staged: Path
) -> tuple[Manifest, AuditResult]:
    """Load, scan and audit the snapshot at *root* of *staged*, whose hash is *digest*."""
    manifest = load_manifest(root, allow_broad=host.policy.allow_broad_paths)
    if manifest.name != name:
        raise RefusedError(
            f"the new version is plugin {manifest.name!r}, not {name!r}; update {name!r} from "
            "a folder holding the same plugin"
        )
    report = scan_tree(root, manifest.capabilities)
    audit = static_audit(
        name, digest, report, lint_composition(manifest.capabilities), now=time.time()
    )
    host.manager.store.put_audit(audit)
    auditor = host.manager.auditor
    if auditor is not None:
        # The configured model reads the new version, as an enable would: an approval
        # given on its audit carries over only on as much review (steer33), and a
        # static-only audit here asked every update of such a plugin for consent.
        audit = deep_audit(auditor, root, digest, manifest=manifest, static=audit)
        if not audit.fallback_reason:  # a failed model is never cached
            host.manager.store.put_audit(audit)
    dangers = [f for f in audit.findings if f.severity is Severity.DANGER and not f.covered]
    if dangers:
        shown = "; ".join(f"{f.rule_id} {f.message} ({f.file}:{f.line})" for f in dangers[:3])
        raise RefusedError(
            f"the new version of {name!r} has {len(dangers)} danger finding(s) no declared "
            f"capability covers: {shown}; it would never load, so it is not installed"
        )
    limit = host.policy.max_risk_level
    if audit.risk_level.order > limit.order:
        raise RefusedError(
            f"the new version of {name!r} was audited {audit.risk_level.value} risk, above the "
            f"policy's max_risk_level {limit.value}; review `caplet scan {staged}`"
        )
    return manifest, audit


def new_lock_entry(
    old: LockEntry, manifest: Manifest, digest: str, audit: AuditResult, staged: Path
) -> LockEntry:
    """The lock entry of the new version; a pinned signer must have signed it too."""
    if old.signature is not None:
        try:
            key = parse_public_key(old.signature.public_key)
        except SignatureError as exc:
            raise RefusedError(f"the lock entry's signer key is unusable ({exc})") from exc
        check = check_plugin_signature(staged, digest, {key.key_id_hex: key})
        if check.status is not SignatureStatus.VALID:
            raise RefusedError(
                f"caplet.lock requires plugin {manifest.name!r} to be signed by key "
                f"{old.signature.key_id}, but the new version is not ({check.detail}); get "
                "the publisher's signed release"
            )
    return replace(
        old,
        version=manifest.version,
        digest=digest,
        capabilities=tuple(c.declared for c in manifest.capabilities),
        risk_level=audit.risk_level,
        verdict=audit.verdict,
        audit_provider=audit.provider,
        # The model and its server, which an entry before steer35 did not name.
        audit_model=audit.model if not audit.static_only and audit.endpoint else "",
        audit_endpoint=audit.endpoint if not audit.static_only else "",
        approved_at=now_utc(),
    )


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)
