"""What the tests of an approval's recorded review share (test_carry_over_review, steer33;
test_review_identity, steer35): the scripted server as a model, an approval on an
audit, and a next version that widens nothing."""

from __future__ import annotations

from pathlib import Path

from caplet import PluginHost
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._host._loading import LoadingRules
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._audit.llm_server import LLMServer

__all__ = ["LOCKED", "PLAIN", "approve", "model", "next_version"]

PLAIN = LoadingRules()
LOCKED = LoadingRules(locked=True)


def model(server: LLMServer, name: str = "m", *, url: str | None = None) -> OpenAIProvider:
    """The scripted server as an OpenAI-compatible model *name* (at *url*, when the
    server is to be named otherwise)."""
    return OpenAIProvider(
        ProviderSettings(kind=ProviderKind.OPENAI, model=name, base_url=url or server.url)
    )


def approve(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, auditor: OpenAIProvider | None
) -> None:
    """Audit plugin ``notes`` with *auditor* (None: static-only) and approve it."""
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=auditor, loading=PLAIN
    ) as host:
        host.audit("notes")
        outcome = host.approve("notes")
        assert outcome, outcome.reason


def next_version(directory: Path, line: str = "# the next version's code") -> None:
    """A new version that widens nothing: the same manifest, a code change."""
    source = directory / "plugin.py"
    source.write_text(source.read_text() + f"\n{line}\n")
