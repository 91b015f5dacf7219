"""steer35: what a review is, where it is pinned, and which bytes it read.

steer33 made an approval record its review (`provider:model` or `static-only`) and carry
over only on as much review. Three residuals, each attacked here with the scripted model
server on 127.0.0.1 (tests/_audit/llm_server.py) and a real `PluginHost`:

1. the review named the model, not the server that answered: the same `openai:m` served
   by another base URL (a local server whoever wrote the plugin runs, a changed
   `CAPLET_LLM_BASE_URL`) counted as the approved model's reading;
2. a lock entry recorded the provider kind alone (and the audit the locking process
   happened to hold, not the approval's review);
3. `caplet update` hashed the staged copy, then scanned it and had the model read it: the
   audit was stored under the digest taken before the reads.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._audit._model import AuditResult, CanaryStatus, Verdict
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._findings import RiskLevel
from caplet._host._review_pins import lesser_review, review_of
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._trust._hashing import tree_hash
from caplet._trust._lockfile import read_lockfile, update_lockfile
from tests._audit.llm_server import Exchange, LLMServer, Reply, Script, honest, serve
from tests._host.reviewkit import LOCKED, PLAIN, approve, model, next_version
from tests.conftest import PluginFactory


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.fixture
def theirs() -> Iterator[LLMServer]:
    """A second server that speaks the same API under the same model name: one whoever
    wrote the plugin runs, or the one a changed base URL names."""
    yield from serve()


# -- 1. the server is part of the review ------------------------------------------------------


@pytest.mark.security
def test_the_same_model_name_at_another_server_is_another_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    theirs: LLMServer,
) -> None:
    directory = make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    ours.close()
    next_version(directory)
    other = model(theirs)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=other, loading=PLAIN
    ) as host:
        audit = host.audit("notes")
        assert audit.canary_status is not None
        assert (audit.model_id, audit.risk_level.value, audit.canary_status.value) == (
            "openai:m",
            "LOW",
            "OK",
        )
        assert theirs.exchanges, "the other server read the new version"
        enabled = host.enable("notes")
        assert not enabled
        assert enabled.reason.startswith("plugin 'notes' changed since its approval of ")
        assert (
            f"it was approved on openai:m at {llm.url}'s audit, and this "
            f"content was audited by openai:m at {theirs.url}; configure openai:m "
            f"at {llm.url} (CAPLET_LLM_*) and enable it again, or approve it again "
            "after review (caplet audit notes && caplet approve notes)" in enabled.reason
        ), enabled.reason
        assert "carried over" not in enabled.reason
    other.close()


@pytest.mark.security
def test_a_cached_audit_another_server_made_is_not_the_configured_ones(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    theirs: LLMServer,
) -> None:
    """The audit cache is keyed by `provider:model`; an audit the other server made of
    this content answered for the configured server's, which never read it."""
    make_plugin("notes")
    other = model(theirs)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=other, loading=PLAIN
    ) as host:
        host.audit("notes")
    other.close()
    ours = model(llm)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ours, loading=PLAIN
    ) as host:
        audit = host.audit("notes")
        assert len(llm.exchanges) == 1, "the configured server read it itself"
        assert audit.endpoint == llm.url
    ours.close()


def test_near_miss_the_same_server_spelled_otherwise_carries_the_approval_over(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """The same model at the same server re-approves silently, however its URL is
    written (a trailing slash, the host's case): the API root is compared, not the text."""
    directory = make_plugin("notes")
    first = model(llm)
    approve(plugins_dir, state_dir, launcher, first)
    first.close()
    next_version(directory)
    spelled = model(llm, url=llm.url.replace("http://", "HTTP://") + "/")
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=spelled, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
        assert "carried over" in enabled.reason
        approval = host.manager.store.get_approval("notes")
        assert approval is not None
        assert approval.review == f"openai:m at {llm.url}"
    spelled.close()


def test_near_miss_a_static_approval_carries_over_on_any_servers_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    theirs: LLMServer,
) -> None:
    """A stronger review carries over: a model's audit, wherever it answered, has the
    static audit as its floor."""
    directory = make_plugin("notes")
    approve(plugins_dir, state_dir, launcher, None)
    next_version(directory)
    other = model(theirs)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=other, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
    other.close()


@pytest.mark.security
def test_an_approval_that_names_no_server_vouches_for_no_models_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """A review steer33 recorded (`openai:m`, or told from cached audits) names no
    server: an unknown counts as nothing, even for the same model at the same server."""
    directory = make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ours, loading=PLAIN
    ) as host:
        store = host.manager.store
        approval = store.get_approval("notes")
        assert approval is not None
        store.put_approval(dataclasses.replace(approval, review="openai:m"))
    next_version(directory)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ours, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert not enabled
        assert (
            "was approved on openai:m's audit, which did not record the server that model "
            "answered from (an approval before caplet recorded it, or an auditor that names "
            "no endpoint), so it vouches for no other content's review; this content was "
            f"audited by openai:m at {llm.url}; approve it again after review "
            "(caplet audit notes && caplet approve notes)"
        ) in enabled.reason, enabled.reason
        # Approved again on this server's audit, the next version carries it over.
        assert host.approve("notes")
    next_version(directory, "# and the one after")
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ours, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
    ours.close()


def test_a_model_named_like_a_server_is_no_server() -> None:
    """An application's provider that names no server cannot pass for one through its
    model's name; the same name with the server known is that server's review."""
    root = "http://127.0.0.1:8080/v1"
    unnamed = AuditResult(
        plugin="notes",
        content_hash="sha256-" + "1" * 64,
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="fine",
        findings=(),
        provider="openai",
        model=f"m at {root}",
        canary_status=CanaryStatus.OK,
    )
    assert lesser_review("notes", f"openai:m at {root}", unnamed) is not None
    named = dataclasses.replace(unnamed, model="m", endpoint=root)
    assert review_of(named) == f"openai:m at {root}"
    assert lesser_review("notes", f"openai:m at {root}", named) is None


# -- 2. a lock entry names the model and the server -------------------------------------------


def lock(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> None:
    """`caplet lock` as a machine with no model configured runs it."""
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as host:
        entry = host.manager.lock_entry("notes")
        update_lockfile(host.manager.lockfile_path, lambda lock: lock.with_entry(entry))


def staged_version(plugins_dir: Path, tmp_path: Path) -> Path:
    staged = tmp_path / "v2" / "notes"
    staged.parent.mkdir()
    shutil.copytree(plugins_dir / "notes", staged)
    next_version(staged)
    return staged


@pytest.mark.security
def test_a_lock_entry_pins_the_review_of_its_approval_not_of_the_locking_machine(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    """Approved on a model's audit and locked where no model is configured, the entry
    said `audit_provider = "static-only"`; a locked machine (CI, a fresh checkout: no
    approval of its own) then updated it on a static audit with no question."""
    make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    ours.close()
    lock(plugins_dir, state_dir, launcher)
    staged = staged_version(plugins_dir, tmp_path)
    with PluginHost(
        plugins_dir, state_dir=tmp_path / "ci-state", launcher=launcher, loading=LOCKED
    ) as ci:
        report = ci.update("notes", staged, consent=False)
        assert not report, "updated on a static audit, no question asked"
        assert (
            "the new version of 'notes' widens what was approved (was approved on openai:m at "
            f"{llm.url}'s audit, and this content was audited static-only: no model "
            f"read its code; configure openai:m at {llm.url} (CAPLET_LLM_*)"
        ) in report.reason, report.reason
    entry = read_lockfile(plugins_dir.parent / "caplet.lock").entry("notes")
    assert entry is not None
    assert (entry.audit_provider, entry.audit_model, entry.audit_endpoint) == (
        "openai",
        "m",
        llm.url,
    )


def test_near_miss_a_locked_update_read_by_the_locked_model_carries_over(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    """The entry names the model and the server, so the same model at the same server
    carries it over (before, an entry named `openai` alone and every update asked)."""
    make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    lock(plugins_dir, state_dir, launcher)
    staged = staged_version(plugins_dir, tmp_path)
    with PluginHost(
        plugins_dir,
        state_dir=tmp_path / "ci-state",
        launcher=launcher,
        auditor=ours,
        loading=LOCKED,
    ) as ci:
        report = ci.update("notes", staged, consent=False)
        assert report, report.reason
    entry = read_lockfile(plugins_dir.parent / "caplet.lock").entry("notes")
    assert entry is not None
    assert entry.digest == report.new_digest
    assert entry.review == f"openai:m at {llm.url}"
    ours.close()


@pytest.mark.security
def test_a_lock_entry_from_before_the_model_was_recorded_vouches_for_no_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    lock(plugins_dir, state_dir, launcher)
    lockfile = plugins_dir.parent / "caplet.lock"
    text = lockfile.read_text()
    old = "\n".join(
        line for line in text.splitlines() if not line.startswith(("audit_model", "audit_end"))
    )
    assert old != text.rstrip("\n")
    lockfile.write_text(old + "\n")
    entry = read_lockfile(lockfile).entry("notes")
    assert entry is not None
    assert (entry.audit_provider, entry.review) == ("openai", None)
    staged = staged_version(plugins_dir, tmp_path)
    with PluginHost(
        plugins_dir,
        state_dir=tmp_path / "ci-state",
        launcher=launcher,
        auditor=ours,
        loading=LOCKED,
    ) as ci:
        report = ci.update("notes", staged, consent=False)
        assert not report
        assert (
            "is pinned by a caplet.lock entry that names no model and server for its audit "
            "(audit_provider alone: an entry written before caplet recorded audit_model and "
            "audit_endpoint), so it vouches for no other content's review; this content was "
            f"audited by openai:m at {llm.url}; approve it again after review "
            "(caplet audit notes && caplet approve notes), then lock it again (caplet lock)"
        ) in report.reason, report.reason
    ours.close()


# -- 3. an update's audit is of the bytes it is stored under ----------------------------------


class WritesBeforeReading(OpenAIProvider):
    """caplet's own provider, with another writer of the plugins directory scheduled at
    one point: when the audit asks the prompt budget, just before it reads the files."""

    def __init__(self, settings: ProviderSettings, plugins_dir: Path, text: str) -> None:
        super().__init__(settings)
        self._plugins_dir = plugins_dir
        self._text = text

    @property
    def max_prompt_chars(self) -> int:
        for staged in self._plugins_dir.glob(".caplet-update-notes/new/notes"):
            (staged / "plugin.py").write_text(self._text)
        return super().max_prompt_chars


def staged_copy(plugins_dir: Path) -> Path:
    (staged,) = plugins_dir.glob(".caplet-update-notes/new/notes")
    return staged


def restores(plugins_dir: Path, text: str) -> Script:
    """The model's answer, while the writer puts *text* back into the staged copy."""

    def script(exchange: Exchange) -> Reply:
        (staged_copy(plugins_dir) / "plugin.py").write_text(text)
        return honest()(exchange)

    return script


@pytest.mark.security
def test_an_updates_audit_is_of_the_bytes_its_digest_names(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    """Hashed with the new code, read by the model as the old code, the new code put back
    while the model answers: the audit of code nobody installs was stored under the new
    code's digest, and the update installed the new code on it, carried over."""
    make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    ours.close()
    staged = staged_version(plugins_dir, tmp_path)
    marker = "# NEW CODE THE MODEL MUST READ"
    new_code = (staged / "plugin.py").read_text() + marker + "\n"
    (staged / "plugin.py").write_text(new_code)
    old_code = (plugins_dir / "notes" / "plugin.py").read_text()
    writer = WritesBeforeReading(
        ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url=llm.url),
        plugins_dir,
        old_code,
    )
    llm.script(restores(plugins_dir, new_code))
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=writer, loading=PLAIN
    ) as host:
        report = host.update("notes", staged, consent=False)
        assert report, report.reason
        assert tree_hash(plugins_dir / "notes") == report.new_digest
        assert (plugins_dir / "notes" / "plugin.py").read_text() == new_code
        assert marker in llm.exchanges[-1].prompt, "the model read the installed bytes"
    writer.close()


@pytest.mark.security
def test_an_update_whose_files_change_while_audited_is_refused(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    make_plugin("notes")
    ours = model(llm)
    approve(plugins_dir, state_dir, launcher, ours)
    staged = staged_version(plugins_dir, tmp_path)
    other = "def run():\n    return 'other bytes'\n"
    llm.script(restores(plugins_dir, other))
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ours, loading=PLAIN
    ) as host:
        before = host.manager.current_hash("notes")
        report = host.update("notes", staged, consent=True)
        assert not report
        assert report.reason.startswith(
            "the new version of 'notes' changed while it was audited (the files read for its "
            "audit hash sha256-"
        ), report.reason
        assert (
            "so it is not installed: the audit would vouch for other files than the ones "
            "installed; make sure nothing writes the plugins directory during the update, "
            "then run caplet update notes again"
        ) in report.reason
        assert host.manager.current_hash("notes") == before
    ours.close()
