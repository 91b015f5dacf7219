"""steer31: the shell approves the content it shows, not the content that runs.

While a plugin is enabled, what a host says of it is the content it runs (textpin: the
agent's text is built from that view), and `/plugin approve` showed that view: after the
folder changed under the running plugin, the screen showed the running version's grant
("capabilities: none") above "Approve notes 1.0.0 with these capabilities?", and the
approval recorded the folder's new content, with the capability it added, never shown.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from caplet._cli._shell import Shell
from caplet._host._host import PluginHost
from tests.conftest import PluginFactory

_SOURCE = "def create_functions(config):\n    return {'notes': {'read': lambda: 'v1'}}\n"
_ADDED = "env.read:AWS_SECRET_ACCESS_KEY"


def _run(host: PluginHost, *lines: str) -> tuple[str, str]:
    """A shell session over ``lines``: (what it printed, what it printed on stderr)."""
    answers = list(lines)

    def read(prompt: str, /) -> str:
        if not answers:
            raise EOFError
        return answers.pop(0)

    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, width=200, color_system=None, highlight=False)
    errors = Console(file=err, width=200, color_system=None, highlight=False)
    Shell(host, read, console, err=errors, interactive=True).run()
    return out.getvalue(), err.getvalue()


@pytest.fixture
def notes(make_plugin: PluginFactory) -> Path:
    return make_plugin("notes", source=_SOURCE, modules='[modules.notes]\nfunctions = ["read"]\n')


@pytest.fixture
def host(notes: Path, plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir) as plugin_host:
        yield plugin_host


def _widen(notes: Path) -> None:
    manifest = notes / "plugin.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace("\n[modules", f'\ncapabilities = ["{_ADDED}"]\n[modules', 1))
    assert _ADDED in manifest.read_text()


@pytest.mark.security
def test_approving_a_running_plugin_shows_the_content_it_approves(
    notes: Path, host: PluginHost
) -> None:
    out, err = _run(host, "/plugin enable notes", "y")
    assert "enabled" in out, out + err
    _widen(notes)
    out, err = _run(host, "/plugin approve notes", "y")
    record = host.get_approval_record("notes")
    assert record is not None, out + err
    # What was approved is what the screen showed as the grant, right above the question.
    assert _ADDED in record.capabilities
    assert f"  capabilities: {_ADDED}" in out.splitlines(), out
    # The running version is still what the host says runs (textpin's view).
    info = host.get_plugin("notes")
    assert info is not None
    assert not info.manifest.capabilities


@pytest.mark.security
def test_an_approval_of_a_manifest_other_than_the_contents_is_refused(
    notes: Path, host: PluginHost
) -> None:
    # The API's pin: the manifest a person was shown is approved only if it is the
    # content's. The running view of an enabled plugin whose folder widened is not.
    _run(host, "/plugin enable notes", "y")
    running = host.get_plugin("notes")
    assert running is not None
    _widen(notes)
    audit = host.audit("notes")
    outcome = host.approve("notes", content_hash=audit.content_hash, manifest=running.manifest)
    assert not outcome
    assert "what was shown is the manifest of other content than the content approved" in (
        outcome.reason
    )
    assert f"capabilities {_ADDED}); nothing was approved" in outcome.reason
    assert host.get_approval_record("notes") is None
    shown = host.manager.reviewed_manifest("notes", audit.content_hash)
    assert shown is not None
    assert _ADDED in [c.declared for c in shown.capabilities]
    assert host.approve("notes", content_hash=audit.content_hash, manifest=shown)


@pytest.mark.security
def test_approving_an_unchanged_running_plugin_still_works(notes: Path, host: PluginHost) -> None:
    # Near miss: enabled, the folder as it runs: approved as shown.
    _run(host, "/plugin enable notes", "y")
    out, err = _run(host, "/plugin approve notes", "y")
    assert "approved: " in out, out + err
    assert "  capabilities: none" in out.splitlines()
    assert host.is_approved("notes")


@pytest.mark.security
def test_a_running_plugin_is_described_by_the_content_it_runs(
    notes: Path, host: PluginHost
) -> None:
    # Enabled on a consent (no approval); then the folder changes and its new content is
    # audited and approved. The host said "approved", with the new content's hash and
    # audit, of a plugin still running the content nobody approved.
    assert host.enable("notes", consent=True)
    before = host.get_plugin("notes")
    assert before is not None
    assert before.audit is not None
    (notes / "plugin.py").write_text(_SOURCE.replace("'v1'", "'v2'"))
    host.discover()
    audit = host.audit("notes")
    assert host.approve("notes", content_hash=audit.content_hash)
    assert host.call("notes", "notes.read") == "v1"
    info = host.get_plugin("notes")
    assert info is not None
    assert info.content_hash == before.content_hash != audit.content_hash
    assert not info.approved
    assert info.audit == before.audit
    # Near miss: the folder's content is what is approved, and what runs once re-enabled.
    assert host.is_approved("notes")
    assert host.disable("notes")
    assert host.enable("notes")
    again = host.get_plugin("notes")
    assert again is not None
    assert again.approved
    assert again.content_hash == audit.content_hash
    assert host.call("notes", "notes.read") == "v2"
