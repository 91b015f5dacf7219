"""Locked mode: only what caplet.lock pins runs, with only the capabilities it approves."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from caplet import LifecycleError, PluginCallError, PluginHost, PluginManager, PluginState
from caplet._config._prompt import Prompter
from caplet._config._schema import ConfigField, ConfigValue
from caplet._errors import LockedModeError, LockfileError
from caplet._host._loading import LoadingRules
from caplet._host._locked import LockProblem, LockProblemKind
from caplet._trust._keyring import Keyring
from caplet._trust._lockfile import Lockfile, read_lockfile, update_lockfile
from caplet._trust._signing import SIGNATURE_FILE, generate_keypair, sign_digest
from tests.conftest import PluginFactory

LOCKED = LoadingRules(locked=True)

HELPERS = {
    "helpers.py": "WORDS = 'words.txt'\n",
    "data/words.txt": "alpha\nbeta\n",
}
USES_HELPER = """
import helpers

def create_functions(config):
    def run(*args, **kwargs):
        return helpers.WORDS
    return {"main": {"run": run}}
"""


def pin(plugins_dir: Path, state_dir: Path, name: str, *, withhold: Collection[str] = ()) -> None:
    """Audit, approve and lock *name* (as `caplet audit/approve/lock` would)."""
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        manager.audit(name)
        assert manager.approve(name)
        entry = manager.lock_entry(name, withhold=withhold)
        update_lockfile(manager.lockfile_path, lambda lock: lock.with_entry(entry))


@pytest.fixture
def ci_state(tmp_path: Path) -> Path:
    """A fresh state directory, as on a CI machine: no approvals, no audits."""
    return tmp_path / "ci-state"


@pytest.fixture
def locked_host(plugins_dir: Path, ci_state: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=ci_state, loading=LOCKED, discover=False) as host:
        yield host


class FailingPrompter:
    """A prompter that fails the test if it is ever asked anything."""

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        raise AssertionError(f"{plugin} was prompted for {field.name}")


def test_without_a_lock_file_every_plugin_is_inert(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path
) -> None:
    make_plugin("p")
    locked_host.discover()
    info = locked_host.manager.require_plugin("p")
    assert info.state is PluginState.INERT
    outcome = locked_host.enable("p")
    assert not outcome
    assert outcome.reason.startswith("plugin 'p' is inert in locked mode: lock file ")
    assert f"{plugins_dir.parent / 'caplet.lock'} does not exist" in outcome.reason


def test_a_pinned_plugin_runs_without_any_approval_in_the_state(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("p")
    pin(plugins_dir, state_dir, "p")
    locked_host.discover()
    assert locked_host.manager.store.get_approval("p") is None, "a fresh CI state directory"
    assert locked_host.enable("p")
    assert locked_host.call("p", "main.run", 2) == {"args": [2], "config": {}}
    [enable] = [d for d in locked_host.manager.store.decisions("p") if d.action == "enable"]
    assert enable.allowed
    assert enable.detail.startswith("locked: ")


def test_a_plugin_without_an_entry_is_inert_and_never_prompted_for(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("pinned")
    pin(plugins_dir, state_dir, "pinned")
    make_plugin("new", extra='[config.token]\ntype = "string"\nprompt = true\n')
    locked_host.discover()
    prompter: Prompter = FailingPrompter()
    outcome = locked_host.enable("new", prompter=prompter)
    assert not outcome
    assert "plugin 'new' is inert in locked mode: the lock file" in outcome.reason
    assert "has no entry for it" in outcome.reason
    assert "caplet lock new" in outcome.reason
    with pytest.raises(LifecycleError, match="has no entry for it"):
        locked_host.configure("new", prompter=prompter)


@pytest.mark.parametrize("changed", ["plugin.py", "helpers.py", "plugin.toml", "data/words.txt"])
def test_tampering_with_any_file_after_locking_makes_the_plugin_inert(
    locked_host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    changed: str,
) -> None:
    directory = make_plugin("p", source=USES_HELPER, files=HELPERS)
    pin(plugins_dir, state_dir, "p")
    pinned = read_lockfile(plugins_dir.parent / "caplet.lock").entry("p")
    assert pinned is not None
    with (directory / changed).open("a") as handle:
        handle.write("\n# changed\n")
    locked_host.discover()
    info = locked_host.manager.require_plugin("p")
    assert info.state is PluginState.INERT
    outcome = locked_host.enable("p")
    assert not outcome
    assert "its content changed since it was locked" in outcome.reason
    assert f"pins {pinned.digest}" in outcome.reason
    assert f"hashes to {info.content_hash}" in outcome.reason
    assert locked_host.worker_pid("p") is None


def test_approved_capabilities_must_be_declared(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("p", extra='capabilities = ["env.read:A"]')
    pin(plugins_dir, state_dir, "p")
    lock_path = plugins_dir.parent / "caplet.lock"
    text = lock_path.read_text().replace('"env.read:A"', '"env.read:A", "env.read:B"')
    lock_path.write_text(text)
    locked_host.discover()
    outcome = locked_host.enable("p")
    assert not outcome
    assert "approves capabilities its manifest does not declare (env.read:B)" in outcome.reason


READS_FILES = """
def create_functions(config):
    def read(path):
        with open(path) as handle:
            return handle.read()
    return {"main": {"read": read}}
"""


def test_a_declared_capability_the_lock_does_not_approve_is_not_granted(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    granted, withheld = plugins_dir.parent / "granted", plugins_dir.parent / "withheld"
    for directory in (granted, withheld):
        directory.mkdir()
        (directory / "note.txt").write_text(f"from {directory.name}")
    make_plugin(
        "reader",
        source=READS_FILES,
        extra=f'capabilities = ["fs.read:{granted}", "fs.read:{withheld}"]',
        modules='[modules.main]\nfunctions = ["read"]\n',
    )
    pin(plugins_dir, state_dir, "reader", withhold=[f"fs.read:{withheld}"])
    entry = read_lockfile(plugins_dir.parent / "caplet.lock").entry("reader")
    assert entry is not None
    assert entry.capabilities == (f"fs.read:{granted}",)
    locked_host.discover()
    assert locked_host.enable("reader")
    info = locked_host.manager.require_plugin("reader")
    assert [str(c) for c in info.capabilities] == [f"fs.read:{granted}"]
    assert locked_host.call("reader", "main.read", str(granted / "note.txt")) == "from granted"
    with pytest.raises(PluginCallError, match=r"No such file or directory|Permission denied"):
        locked_host.call("reader", "main.read", str(withheld / "note.txt"))
    denied = [d for d in locked_host.manager.store.decisions("reader") if d.action == "grant"]
    assert [(d.target, d.allowed) for d in denied] == [(f"fs.read:{withheld}", False)]


def test_a_withheld_capability_uncovers_the_danger_it_covered(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin(
        "env",
        source="""
            import os

            def create_functions(config):
                def run():
                    return os.environ["SECRET_TOKEN"]
                return {"main": {"run": run}}
        """,
        extra='capabilities = ["env.read:SECRET_TOKEN"]',
    )
    pin(plugins_dir, state_dir, "env", withhold=["env.read:SECRET_TOKEN"])
    locked_host.discover()
    outcome = locked_host.enable("env")
    assert not outcome
    reason = outcome.reason
    assert "refused by 1 danger finding(s) that only withheld capabilities would cover" in reason
    assert "CPL-ENV-001 at plugin.py:6 needs env.read:SECRET_TOKEN" in reason
    # Issue 14: it said "declare env.read:<NAME>", though the plugin declares it.
    assert "declare env.read" not in reason
    assert (
        f"plugin 'env' declares env.read:SECRET_TOKEN, but its entry in the lock file "
        f"{plugins_dir.parent / 'caplet.lock'} does not approve it" in reason
    )
    assert "re-pin it without --withhold (caplet approve env && caplet lock env)" in reason


WANTS_APP = """
from caplet.plugin import ContextError

def create_functions(config):
    def run(ctx, name):
        try:
            return ctx.app(name, {})
        except ContextError as exc:
            return str(exc)
    return {"main": {"run": run}}
"""


def test_a_withheld_capability_refused_at_run_time_names_the_lock_entry(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin(
        "notes", source=WANTS_APP, extra='capabilities = ["app:notes.read", "app:notes.write"]'
    )
    pin(plugins_dir, state_dir, "notes", withhold=["app:notes.write"])
    locked_host.register_capability("app:notes.read", lambda call: ["a note"])
    locked_host.register_capability("app:notes.write", lambda call: "written")
    locked_host.discover()
    assert locked_host.enable("notes")
    assert locked_host.call("notes", "main.run", "notes.read") == ["a note"]
    said = locked_host.call("notes", "main.run", "notes.write")
    assert said.startswith("not granted: plugin 'notes' declares app:notes.write, but its entry")
    assert "caplet approve notes && caplet lock notes" in said
    assert "declare it in" not in said
    [grant] = [d for d in locked_host.manager.store.decisions("notes") if d.action == "grant"]
    assert (grant.target, grant.allowed) == ("app:notes.write", False)
    assert "does not approve it (withheld when it was pinned)" in grant.detail


def test_a_lock_entry_whose_version_is_not_the_manifests_is_reported(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    """Issue 14: verify ignored the lock's version."""
    make_plugin("p")
    pin(plugins_dir, state_dir, "p")
    path = plugins_dir.parent / "caplet.lock"

    def pinned_as(version: str) -> Callable[[Lockfile], Lockfile]:
        def change(lock: Lockfile) -> Lockfile:
            entry = lock.entry("p")
            assert entry is not None
            return lock.with_entry(replace(entry, version=version))

        return change

    update_lockfile(path, pinned_as("9.9.9"))
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        [problem] = manager.verify()
    assert isinstance(problem, LockProblem)
    assert problem.kind is LockProblemKind.VERSION_MISMATCH
    assert (
        f"the lock file {path}, plugin 'p', field 'version' says '9.9.9', but its manifest "
        "says '1.0.0'" in problem.message
    )
    locked_host.discover()
    outcome = locked_host.enable("p")
    assert not outcome
    assert "field 'version' says '9.9.9'" in outcome.reason
    # PEP 440 equality: 1.0 pins 1.0.0.
    update_lockfile(path, pinned_as("1.0"))
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        assert manager.verify() == []


def test_a_lock_entry_whose_version_is_past_the_digit_limit_is_a_mismatch(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    # attack29: packaging's Version raised the digit limit's ValueError (no
    # InvalidVersion) for a cloned project's caplet.lock, and every command in locked
    # mode (CI=true) ended in an internal error.
    make_plugin("p")
    pin(plugins_dir, state_dir, "p")
    path = plugins_dir.parent / "caplet.lock"

    def long_version(lock: Lockfile) -> Lockfile:
        entry = lock.entry("p")
        assert entry is not None
        return lock.with_entry(replace(entry, version="9" * 5_000))

    update_lockfile(path, long_version)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        [problem] = manager.verify()
    assert isinstance(problem, LockProblem)
    assert problem.kind is LockProblemKind.VERSION_MISMATCH
    assert "but its manifest says '1.0.0'" in problem.message


def test_lock_entry_needs_an_approval_of_the_current_content(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("p")
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        with pytest.raises(LockfileError, match="plugin 'p' is not approved"):
            manager.lock_entry("p")
        manager.audit("p")
        manager.approve("p")
        with pytest.raises(LockfileError, match=r"does not declare env\.read:X"):
            manager.lock_entry("p", withhold=["env.read:X"])


def test_verify_reports_every_problem_and_stale_entries(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("gone")
    make_plugin("kept")
    pin(plugins_dir, state_dir, "gone")
    pin(plugins_dir, state_dir, "kept")
    (plugins_dir / "gone" / "plugin.py").unlink()
    (plugins_dir / "gone" / "plugin.toml").unlink()
    (plugins_dir / "gone").rmdir()
    make_plugin("unpinned")
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        problems = manager.verify()
    kinds = [(p.plugin, p.kind) for p in problems if isinstance(p, LockProblem)]
    assert kinds == [
        ("unpinned", LockProblemKind.NO_ENTRY),
        ("gone", LockProblemKind.STALE),
    ]
    stale = problems[-1]
    assert isinstance(stale, LockProblem)
    assert "has a stale entry 'gone': no such plugin was found" in stale.message


def test_allowlist_limits_what_may_load(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("a")
    make_plugin("b")
    rules = LoadingRules(allowlist=frozenset({"a"}))
    with PluginHost(plugins_dir, state_dir=state_dir, loading=rules) as host:
        assert host.enable("a", consent=True)
        outcome = host.enable("b", consent=True)
        assert not outcome
        assert outcome.reason == (
            "plugin 'b' is not in CAPLET_LOAD_PLUGINS (allowed: a); add it there to load it"
        )
    with PluginHost(
        plugins_dir, state_dir=state_dir, loading=LoadingRules(allowlist=frozenset())
    ) as host:
        assert "(allowed: none)" in host.enable("a").reason


def test_strict_loading_raises_instead_of_warning(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("p")
    make_plugin("bad", manifest="name = 3\n")
    with pytest.raises(LockedModeError) as info:
        PluginManager(
            plugins_dir, state_dir=state_dir, loading=LoadingRules(locked=True, strict=True)
        ).discover()
    assert len(info.value.problems) == 2
    assert "bad" in info.value.problems[0], "the broken folder, named"
    assert "plugin 'p' is inert in locked mode" in info.value.problems[1]


@pytest.mark.parametrize(
    ("env", "inert"),
    [
        ({"CI": "true"}, True),
        ({"CAPLET_LOCKED": "1"}, True),
        ({"CI": "true", "CAPLET_LOCKED": "0"}, False),
    ],
)
def test_ci_turns_locked_mode_on_by_default(
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    inert: bool,
) -> None:
    make_plugin("p")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with PluginManager(plugins_dir, state_dir=state_dir) as manager:
        manager.discover()
        assert manager.locked is inert
        assert bool(manager.inert_reason("p")) is inert


def test_a_pinned_signer_must_have_signed_the_content(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    directory = make_plugin("p")
    secret = generate_keypair()
    Keyring(state_dir).add(secret.public_key)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        digest = manager.current_hash("p")
    (directory / SIGNATURE_FILE).write_text(sign_digest(secret, digest, trusted_comment="p"))
    pin(plugins_dir, state_dir, "p")
    entry = read_lockfile(plugins_dir.parent / "caplet.lock").entry("p")
    assert entry is not None
    assert entry.signature is not None
    assert entry.signature.key_id == secret.public_key.key_id_hex
    # CI has no keyring: the key pinned in the lock file verifies the signature.
    locked_host.discover()
    assert locked_host.enable("p")
    locked_host.disable("p")
    (directory / SIGNATURE_FILE).unlink()
    locked_host.discover()
    outcome = locked_host.enable("p")
    assert not outcome
    assert f"requires a signature by key {secret.public_key.key_id_hex}" in outcome.reason


def test_a_different_source_is_inert(
    locked_host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("p")
    pin(plugins_dir, state_dir, "p")
    lock_path = plugins_dir.parent / "caplet.lock"
    lock_path.write_text(
        lock_path.read_text().replace(
            'source = "directory"', 'source = "distribution"\ndistribution = "acme"'
        )
    )
    locked_host.discover()
    outcome = locked_host.enable("p")
    assert "pins it from distribution acme, but it was found as directory" in outcome.reason
