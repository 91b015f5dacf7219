"""steer32's open row, closed by steer33: an approval carries over only on as much review.

A new version that widens nothing carries the approval's consent over once its own audit
passes the danger gate and the risk policy (attack13d). The approval recorded the risk it
was given at, not what reviewed it: approved on a model's audit (canaries OK, LOW), the
plugin's next version, enabled where no model is configured (a CI job, a cron job, a
machine without `CAPLET_LLM_*`), was audited static-only, LOW, and enabled, "carried over:
nothing widened". The new code's behaviour, which only the model reads, was never read.
Since steer33 an approval records its review (`ApprovalRecord.review`, schema 12) and a
lesser review is a widening (`caplet._host._review_pins`).
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
from caplet._host._consent import ConsentReason, ConsentRequest
from caplet._host._policy import Policy
from caplet._host._review_pins import lesser_review, review_of
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._audit.llm_server import LLMServer, Reply, honest, serve
from tests._host.reviewkit import PLAIN, approve, model, next_version
from tests.conftest import PluginFactory

SERVER = "https://api.openai.com:443/v1"


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.mark.security
def test_an_approval_a_model_reviewed_does_not_carry_over_on_a_static_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    directory = make_plugin("notes")
    llm.script(honest())
    provider = model(llm)
    approve(plugins_dir, state_dir, launcher, provider)
    provider.close()
    next_version(directory)
    asked: list[ConsentRequest] = []

    def refuse(request: ConsentRequest) -> bool:
        asked.append(request)
        return False

    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as unreviewed:
        assert unreviewed.audit("notes").static_only
        approval = unreviewed.manager.store.get_approval("notes")
        assert approval is not None
        assert approval.review == f"openai:m at {llm.url}"
        enabled = unreviewed.enable("notes")
        assert not enabled
        assert (
            "and widens nothing, but its audit is less of a review than the one that approval "
            f"was given on: it was approved on openai:m at {llm.url}'s audit, and this content "
            "was audited static-only: no model read its code; configure openai:m at "
            f"{llm.url} (CAPLET_LLM_*) and enable "
            "it again, or approve it again after review (caplet audit notes && caplet approve "
            "notes)"
        ) in enabled.reason
        assert "carried over" not in enabled.reason
        assert not unreviewed.enable("notes", consent=refuse)
        (request,) = asked
        assert request.reason is ConsentReason.LESSER_REVIEW
        assert request.widening is not None
        assert request.widening.review is not None
        assert request.widening.review.approved == f"openai:m at {llm.url}"
        # An explicit decision stays explicit: a person who consents enables it.
        assert unreviewed.enable("notes", consent=True)


@pytest.mark.security
def test_another_model_does_not_stand_in_for_the_one_the_approval_was_given_on(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """A provider or model change between versions: which of two models reads code better
    caplet cannot tell, and the person relied on the first one's reading."""
    directory = make_plugin("notes")
    first = model(llm, "big")
    approve(plugins_dir, state_dir, launcher, first)
    first.close()
    next_version(directory)
    second = model(llm, "tiny")
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=second, loading=PLAIN
    ) as host:
        audit = host.audit("notes")
        assert (audit.model_id, audit.risk_level.value) == ("openai:tiny", "LOW")
        enabled = host.enable("notes")
        assert not enabled
        assert (
            f"was approved on openai:big at {llm.url}'s audit, and this content was audited by "
            f"openai:tiny at {llm.url}; configure openai:big at {llm.url} (CAPLET_LLM_*)"
        ) in enabled.reason
    second.close()


@pytest.mark.security
def test_the_same_model_whose_canaries_prove_nothing_is_a_lesser_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """The approved model, but its answer for the new version invents identifiers
    (AUDITOR_UNRELIABLE, MEDIUM) and the approval was given at MEDIUM: the risk did not
    rise, and nothing shows the model read this content."""
    directory = make_plugin("notes")
    provider = model(llm)
    llm.script(honest(risk_level="MEDIUM", recommendation="approve"))
    approve(plugins_dir, state_dir, launcher, provider)
    next_version(directory)
    invented = "99999999-8888-4777-8666-555555555555"
    llm.script(
        honest(
            risk_level="MEDIUM",
            extra_injections=[{"excerpt": f"# override {invented}", "reason": "?"}],
        )
    )
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as host:
        audit = host.audit("notes")
        assert audit.canary_status is not None
        assert audit.canary_status.value == "AUDITOR_UNRELIABLE"
        assert audit.risk_level.value == "MEDIUM"
        enabled = host.enable("notes")
        assert not enabled
        assert (
            f"was approved on openai:m at {llm.url}'s audit, and this content was audited by "
            f"openai:m at {llm.url} (AUDITOR_UNRELIABLE); audit it again (caplet audit notes "
            "--fresh)"
        ) in enabled.reason
    provider.close()


def test_near_miss_a_static_approval_carries_over_on_a_static_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
) -> None:
    directory = make_plugin("notes")
    approve(plugins_dir, state_dir, launcher, None)
    next_version(directory)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as host:
        approval = host.manager.store.get_approval("notes")
        assert approval is not None
        assert approval.review == "static-only"
        enabled = host.enable("notes")
        assert enabled, enabled.reason
        assert "carried over: nothing widened" in enabled.reason


def test_near_miss_a_model_approval_carries_over_on_that_models_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    directory = make_plugin("notes")
    provider = model(llm)
    approve(plugins_dir, state_dir, launcher, provider)
    next_version(directory)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
        assert "audited openai; approval of" in enabled.reason
        assert "carried over: nothing widened" in enabled.reason
    provider.close()


def test_near_miss_a_static_approval_carries_over_on_a_models_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """A model's audit has the static audit as its floor: more review, not less."""
    directory = make_plugin("notes")
    approve(plugins_dir, state_dir, launcher, None)
    next_version(directory)
    provider = model(llm)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
        assert "carried over: nothing widened" in enabled.reason
    provider.close()


@pytest.mark.security
def test_an_update_does_not_carry_a_models_approval_to_a_version_no_model_read(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    """The same through `caplet update`: its audit of the staged version is static-only,
    and it rewrote the approval for the new version, which every later enable then took
    as approved (the fast path, no carry-over to check)."""
    make_plugin("notes")
    provider = model(llm)
    approve(plugins_dir, state_dir, launcher, provider)
    provider.close()
    staged = tmp_path / "v2" / "notes"
    staged.parent.mkdir()
    shutil.copytree(plugins_dir / "notes", staged)
    next_version(staged)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as host:
        report = host.update("notes", staged, consent=False)
        assert not report
        assert (
            f"widens what was approved (was approved on openai:m at {llm.url}'s audit, and this "
            "content was audited static-only: no model read its code; configure openai:m at "
            f"{llm.url}"
        ) in report.reason
        approval = host.manager.store.get_approval("notes")
        assert approval is not None
        assert approval.review == f"openai:m at {llm.url}"
        # Consent given explicitly: the update goes through, and the approval it writes
        # says what reviewed the new version.
        report = host.update("notes", staged, consent=True)
        assert report, report.reason
        approval = host.manager.store.get_approval("notes")
        assert approval is not None
        assert (approval.content_hash, approval.review) == (report.new_digest, "static-only")


@pytest.mark.security
def test_an_approval_that_predates_recorded_reviews_vouches_for_no_new_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
) -> None:
    """An approval the migration could not tell the review of (no audit of its content
    cached, or several models') is held to none: the next version asks once, saying why."""
    directory = make_plugin("notes")
    approve(plugins_dir, state_dir, launcher, None)
    next_version(directory)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as host:
        store = host.manager.store
        approval = store.get_approval("notes")
        assert approval is not None
        store.put_approval(dataclasses.replace(approval, review=None))
        enabled = host.enable("notes")
        assert not enabled
        assert (
            "was approved before caplet recorded what reviewed an approval (a model or the "
            "static scanner alone), so it vouches for no other content's review; this content "
            "was audited static-only: no model read its code; approve it again after review "
            "(caplet audit notes && caplet approve notes)"
        ) in enabled.reason


@pytest.mark.security
def test_a_model_that_fails_on_the_new_version_is_no_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """The model errors on the new version (its retries run out): the audit falls back to
    static-only, HIGH. Under a policy that lets HIGH through, the raised risk asked already
    (held on main); it is a lesser review too, and both are said."""
    directory = make_plugin("notes")
    provider = model(llm)
    approve(plugins_dir, state_dir, launcher, provider)
    next_version(directory)
    llm.script(*[Reply(status=503) for _ in range(4)])
    with PluginHost(
        plugins_dir,
        state_dir=state_dir,
        launcher=launcher,
        auditor=provider,
        loading=PLAIN,
        policy=Policy(max_risk_level=RiskLevel.HIGH),
    ) as host:
        audit = host.audit("notes")
        assert audit.fallback_reason
        assert audit.static_only
        enabled = host.enable("notes")
        assert not enabled
        assert "was approved at risk LOW, is now audited HIGH" in enabled.reason
        assert (
            f"was approved on openai:m at {llm.url}'s audit, and this content was audited "
            "static-only"
        ) in (enabled.reason)
    provider.close()


def test_near_miss_an_update_read_by_the_approved_model_carries_the_approval_over(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
    tmp_path: Path,
) -> None:
    """With the approved model configured, `caplet update` has it read the new version
    (its audit was static-only: every update of a model-approved plugin would ask)."""
    make_plugin("notes")
    provider = model(llm)
    approve(plugins_dir, state_dir, launcher, provider)
    staged = tmp_path / "v2" / "notes"
    staged.parent.mkdir()
    shutil.copytree(plugins_dir / "notes", staged)
    next_version(staged)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as host:
        report = host.update("notes", staged, consent=False)
        assert report, report.reason
        assert report.audit is not None
        assert report.audit.model_id == "openai:m"
        approval = host.manager.store.get_approval("notes")
        assert approval is not None
        assert (approval.content_hash, approval.review) == (
            report.new_digest,
            f"openai:m at {llm.url}",
        )
    provider.close()


def test_an_audit_no_canary_checked_is_no_models_review() -> None:
    """An application's own audit (`set_audit_result`) that names a model but checked no
    canaries proves nothing of that model's reading; a static approval takes any audit."""
    audit = AuditResult(
        plugin="notes",
        content_hash="sha256-" + "1" * 64,
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="fine",
        findings=(),
        provider="openai",
        model="m",
        endpoint=SERVER,
    )
    change = lesser_review("notes", f"openai:m at {SERVER}", audit)
    assert change is not None
    assert change.describe().startswith(
        f"was approved on openai:m at {SERVER}'s audit, and this content was audited by "
        f"openai:m at {SERVER} (no canaries checked); audit it again (caplet audit notes --fresh)"
    )
    assert lesser_review("notes", "static-only", audit) is None
    proven = dataclasses.replace(audit, canary_status=CanaryStatus.OK)
    assert lesser_review("notes", f"openai:m at {SERVER}", proven) is None
    assert review_of(proven) == f"openai:m at {SERVER}"
    assert review_of(dataclasses.replace(audit, provider="static-only", model="")) == (
        "static-only"
    )


@pytest.mark.security
def test_a_new_version_the_model_cannot_read_whole_is_refused_not_raised(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    """steer33's note: a new version grown past the model's prompt budget made
    ``enable`` raise PromptTooLargeError (naming the run directory's snapshot), where
    every other refusal is an Outcome; an application enabling plugins in a loop stopped
    there. It is refused, naming the plugin and the ways out."""
    directory = make_plugin("notes")
    llm.script(honest())
    approve(plugins_dir, state_dir, launcher, model(llm))
    source = directory / "plugin.py"
    source.write_text(source.read_text() + "# the next version's padding\n" * 3000)
    small = OpenAIProvider(
        ProviderSettings(
            kind=ProviderKind.OPENAI, model="m", base_url=llm.url, max_prompt_chars=20_000
        )
    )
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=small, loading=PLAIN
    ) as host:
        refused = host.enable("notes")
        assert not refused
        assert "plugin 'notes': its files exceed" in refused.reason
        assert "more than the model's prompt budget allows (CAPLET_LLM_MAX_PROMPT_CHARS)" in (
            refused.reason
        )
        assert "or audit it static-only (unset CAPLET_LLM_PROVIDER)" in refused.reason
        assert "snapshot-" not in refused.reason
        assert not host.manager.require_plugin("notes").enabled
