"""steer32, open: an approval given on a model's review carries over on a static one.

A new version that widens nothing carries the approval's consent over once its own audit
passes the danger gate and the risk policy (attack13d). The approval records the risk it
was given at, not what reviewed it: approved on a model's audit (canaries OK, LOW), the
plugin's next version, enabled where no model is configured (a CI job, a cron job, a
machine without `CAPLET_LLM_*`), is audited static-only, LOW, and enabled, "carried over:
nothing widened". The new code's behaviour, which only the model reads, was never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._host._loading import LoadingRules
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._audit.llm_server import LLMServer, honest, serve
from tests.conftest import PluginFactory

PLAIN = LoadingRules()


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.mark.security
@pytest.mark.xfail(
    strict=True,
    reason=(
        "steer32 open: an approval given on a model's audit carries over to a new version "
        "audited static-only (no model configured where it is enabled); the approval does "
        "not record what reviewed it (a schema change)"
    ),
)
def test_an_approval_a_model_reviewed_does_not_carry_over_on_a_static_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    directory = make_plugin("notes")
    llm.script(honest())
    provider = OpenAIProvider(
        ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url=llm.url)
    )
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as reviewed:
        reviewed.audit("notes")
        outcome = reviewed.approve("notes")
        assert outcome, outcome.reason
    provider.close()
    source = directory / "plugin.py"
    source.write_text(source.read_text() + "\n# the next version's code\n")
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None, loading=PLAIN
    ) as unreviewed:
        assert unreviewed.audit("notes").static_only
        enabled = unreviewed.enable("notes")
        # What should hold: the carry-over needs a consent that says no model read it.
        assert not enabled, enabled.reason
