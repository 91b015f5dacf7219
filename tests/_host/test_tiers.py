"""Trust tiers: the signature and the source decide the tier; the tier decides the runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet import PluginHost, PluginManager, Policy
from caplet._host._loading import LoadingRules
from caplet._host._policy import TrustTier
from caplet._sandbox._launcher import Worker, WorkerSpec
from caplet._sandbox._subprocess import SubprocessLauncher
from caplet._trust._keyring import Keyring
from caplet._trust._signing import (
    SIGNATURE_FILE,
    SecretKey,
    SignatureStatus,
    generate_keypair,
    sign_digest,
)
from caplet._trust._source import SourceKind
from tests.conftest import PluginFactory, own_identity

PLAIN = LoadingRules()


@pytest.mark.parametrize(
    ("status", "cap", "tier"),
    [
        (SignatureStatus.VALID, TrustTier.TRUSTED, TrustTier.TRUSTED),
        (SignatureStatus.VALID, TrustTier.COMMUNITY, TrustTier.COMMUNITY),
        (SignatureStatus.MISSING, TrustTier.TRUSTED, TrustTier.COMMUNITY),
        (SignatureStatus.UNTRUSTED_KEY, TrustTier.TRUSTED, TrustTier.COMMUNITY),
        (SignatureStatus.INVALID, TrustTier.TRUSTED, TrustTier.UNTRUSTED),
        (SignatureStatus.MISSING, TrustTier.UNTRUSTED, TrustTier.UNTRUSTED),
    ],
)
def test_tier_for(status: SignatureStatus, cap: TrustTier, tier: TrustTier) -> None:
    policy = Policy(max_tier_distribution=cap)
    assert policy.tier_for(SourceKind.DISTRIBUTION, status) is tier


def test_untrusted_limits_are_tighter() -> None:
    policy = Policy()
    assert policy.memory_limit_mb(None, TrustTier.UNTRUSTED) == policy.untrusted_memory_mb
    assert policy.memory_limit_mb(64, TrustTier.UNTRUSTED) == 64
    assert policy.memory_limit_mb(None, TrustTier.TRUSTED) == policy.memory_mb
    assert policy.cpu_limit_s(None, TrustTier.UNTRUSTED) == policy.untrusted_cpu_s
    assert policy.cpu_cores_limit(TrustTier.UNTRUSTED) == policy.untrusted_cpu_cores == 0.5
    assert policy.cpu_cores_limit(TrustTier.TRUSTED) == policy.cpu_cores == 1.0
    assert policy.timeout_ms(30_000, TrustTier.UNTRUSTED) == policy.untrusted_timeout_ms
    assert policy.processes_limit(TrustTier.UNTRUSTED) == policy.untrusted_processes
    assert (
        policy.max_output_bytes(None, TrustTier.UNTRUSTED) == policy.untrusted_max_output_kb * 1024
    )


def sign(directory: Path, manager: PluginManager, secret: SecretKey, name: str) -> None:
    digest = manager.current_hash(name)
    (directory / SIGNATURE_FILE).write_text(sign_digest(secret, digest, trusted_comment=name))


@pytest.fixture
def key(state_dir: Path) -> SecretKey:
    secret = generate_keypair()
    Keyring(state_dir).add(secret.public_key)
    return secret


def test_signature_decides_the_tier_and_is_shown(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, key: SecretKey
) -> None:
    signed = make_plugin("signed")
    make_plugin("unsigned")
    tampered = make_plugin("tampered")
    other = make_plugin("other")
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN) as manager:
        manager.discover()
        sign(signed, manager, key, "signed")
        sign(tampered, manager, key, "tampered")
        sign(other, manager, generate_keypair(), "other")
        (tampered / "plugin.py").write_text("# changed after signing\n")
        manager.discover()
        found = {p.name: (p.tier, p.signature.status) for p in manager.list_plugins()}
    assert found == {
        "signed": (TrustTier.TRUSTED, SignatureStatus.VALID),
        "unsigned": (TrustTier.COMMUNITY, SignatureStatus.MISSING),
        "tampered": (TrustTier.UNTRUSTED, SignatureStatus.INVALID),
        "other": (TrustTier.COMMUNITY, SignatureStatus.UNTRUSTED_KEY),
    }


def test_the_policy_caps_the_tier_per_source_and_can_list_keys(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    directory = make_plugin("p")
    secret = generate_keypair()  # trusted through the policy, not the keyring
    policy = Policy(trusted_keys=(secret.public_key.base64,))
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, policy=policy) as m:
        m.discover()
        sign(directory, m, secret, "p")
        m.discover()
        assert m.require_plugin("p").tier is TrustTier.TRUSTED
    capped = Policy(trusted_keys=policy.trusted_keys, max_tier_directory=TrustTier.COMMUNITY)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, policy=capped) as m:
        m.discover()
        assert m.require_plugin("p").tier is TrustTier.COMMUNITY


class RecordingLauncher(SubprocessLauncher):
    """A real plain-process launcher that also keeps the specs it was given."""

    def __init__(self) -> None:
        super().__init__(identity=own_identity())
        self.specs: list[WorkerSpec] = []

    def start(self, spec: WorkerSpec) -> Worker:  # type: ignore[override]
        self.specs.append(spec)
        return super().start(spec)


def test_untrusted_plugins_run_with_tighter_limits_and_no_fast_path(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, key: SecretKey
) -> None:
    directory = make_plugin("p")
    launcher = RecordingLauncher()
    policy = Policy()
    with PluginHost(
        plugins_dir, state_dir=state_dir, loading=PLAIN, launcher=launcher, policy=policy
    ) as host:
        host.audit("p")
        assert host.approve("p")
        assert host.enable("p", consent=True)
        sign(directory, host.manager, key, "p")
        (directory / "plugin.py").write_text(
            (directory / "plugin.py").read_text() + "\n# after signing\n"
        )
        host.discover()
        host.audit("p")
        assert host.approve("p")
        assert host.manager.require_plugin("p").tier is TrustTier.UNTRUSTED
        assert host.enable("p", consent=True)
        assert host.call("p", "main.run") == {"args": [], "config": {}}
        enables = [d.detail for d in host.manager.store.decisions("p") if d.action == "enable"]
    community, untrusted = launcher.specs
    assert (
        community.memory_mb,
        community.cpu_s,
        community.processes,
        community.cpu_millicores,
    ) == (policy.memory_mb, policy.cpu_s, policy.processes, 1000)
    assert (
        untrusted.memory_mb,
        untrusted.cpu_s,
        untrusted.processes,
        untrusted.cpu_millicores,
    ) == (policy.untrusted_memory_mb, policy.untrusted_cpu_s, policy.untrusted_processes, 500)
    assert untrusted.max_frame_bytes == policy.untrusted_max_output_kb * 1024
    assert enables == [
        "audited static-only, tier untrusted",
        "approved fast path, tier community",
    ], "newest first: the approved untrusted plugin was audited afresh"


def test_policy_can_require_a_trusted_signature(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, key: SecretKey
) -> None:
    directory = make_plugin("p")
    policy = Policy(require_signature=True)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, policy=policy) as m:
        m.discover()
        outcome = m.enable("p", consent=True)
        assert not outcome
        assert "plugin 'p' has no valid signature by a trusted key (no plugin.minisig)" in (
            outcome.reason
        )
        sign(directory, m, key, "p")
        m.discover()
        assert m.enable("p", consent=True)


def test_broad_paths_are_granted_only_to_trusted_plugins(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, key: SecretKey
) -> None:
    directory = make_plugin("broad", extra='capabilities = ["fs.read:/"]')
    policy = Policy(allow_broad_paths=True)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, policy=policy) as m:
        m.discover()
        outcome = m.enable("broad", consent=True)
        assert not outcome
        assert "plugin 'broad' is community, and the policy grants broad paths" in outcome.reason
        sign(directory, m, key, "broad")
        m.discover()
        assert m.require_plugin("broad").tier is TrustTier.TRUSTED
        assert m.enable("broad", consent=True)
