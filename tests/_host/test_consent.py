"""Consent is never implicit (issue 14, point 1), through the Python API.

The attacks the issue found, each first: an unapproved plugin enabled by a
bare ``enable``; a manifest that gained ``env.read:SECRET`` after approval
re-audited, enabled and reading the secret; a downgrade accepted without a
word. Then the model: a callback shown what a person would see, or
``consent=True``; widening (capability, broader path or origin, requires,
version, risk) always asks, narrowing does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost, PluginManager
from caplet._audit._model import CanaryStatus
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._capabilities._parse import parse_capability
from caplet._config._schema import ConfigField, ConfigValue
from caplet._findings import RiskLevel
from caplet._host._agent_text import agent_text
from caplet._host._consent import (
    ConsentReason,
    ConsentRequest,
    describe_widening,
    is_downgrade,
    widening,
)
from caplet._host._loading import LoadingRules
from caplet._manifest._load import load_manifest
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._trust._lockfile import update_lockfile
from tests._audit.llm_server import LLMServer, serve
from tests.conftest import PluginFactory, rooted

PLAIN = LoadingRules()

READS_SECRET = """
import os

def create_functions(config):
    def run():
        return os.environ.get("CAPLET_TEST_SECRET", "no secret")
    return {"main": {"run": run}}
"""


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with PluginHost(
        plugins_dir,
        state_dir=state_dir,
        launcher=launcher,
        discover=False,
        auditor=None,
        loading=PLAIN,
    ) as h:
        yield h


class Asked:
    """A consent callback that records what it was shown and answers ``answer``."""

    def __init__(self, answer: object = True) -> None:
        self.answer = answer
        self.requests: list[ConsentRequest] = []

    def __call__(self, request: ConsentRequest) -> bool:
        self.requests.append(request)
        return self.answer  # type: ignore[return-value]


def approve(host: PluginHost, name: str) -> None:
    host.discover()
    host.audit(name)
    outcome = host.approve(name)
    assert outcome, outcome.reason


def actions(host: PluginHost, name: str) -> list[tuple[str, bool]]:
    return [(d.action, d.allowed) for d in reversed(host.manager.store.decisions(name))]


# -- no approval: no enable without a decision ------------------------------------------------


def test_enable_of_an_unapproved_plugin_is_refused_with_the_fix(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """Issue 14: host.enable of an unapproved plugin audited statically and enabled."""
    make_plugin("p")
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    reason = outcome.reason
    assert reason.startswith("plugin 'p' is not approved (content sha256-")
    assert "enabling it needs a person's consent" in reason
    assert "caplet audit p && caplet approve p, or host.approve('p')" in reason
    assert "enable(..., consent=callback)" in reason
    assert "consent=True" in reason
    assert host.worker_pid("p") is None, "nothing was started"
    assert not host.manager.require_plugin("p").enabled
    assert ("enable", False) in actions(host, "p")


def test_a_callback_is_shown_what_a_person_would_see(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    make_plugin(
        "reader",
        extra=(
            'capabilities = ["fs.read:${config.root}", "net.http:https://api.example.com"]\n'
            '[config.root]\ntype = "string"\n'
        ),
    )
    host.discover()
    asked = Asked()
    notes = tmp_path / "notes"
    notes.mkdir()
    assert host.enable("reader", [f"root={notes}"], consent=asked)
    [request] = asked.requests
    assert (request.plugin, request.version, request.reason) == (
        "reader",
        "1.0.0",
        ConsentReason.NOT_APPROVED,
    )
    assert request.why.startswith("plugin 'reader' is not approved")
    assert request.content_hash == host.manager.current_hash("reader")
    assert request.audit.static_only
    assert request.audit.content_hash == request.content_hash
    assert [c.declared for c in request.declared] == [
        "fs.read:${config.root}",
        "net.http:https://api.example.com",
    ]
    assert request.granted is not None
    assert [str(c) for c in request.granted] == [
        f"fs.read:{notes}",
        "net.http:https://api.example.com",
    ]
    # The composition lint: a read capability with egress is an exfiltration path.
    assert any("exfiltration" in f.message for f in request.composition)
    assert request.approval is None
    assert request.widening is None
    logged = [d for d in host.manager.store.decisions("reader") if d.action == "consent"]
    assert [(d.allowed, d.detail.split(":")[0]) for d in logged] == [
        (True, "by a consent callback")
    ]
    [enable] = [d for d in host.manager.store.decisions("reader") if d.action == "enable"]
    assert "not approved, consented for this process" in enable.detail


@pytest.mark.parametrize("answer", [False, 1, "yes", None])
def test_only_true_from_the_callback_consents(
    host: PluginHost, make_plugin: PluginFactory, answer: object
) -> None:
    make_plugin("p")
    host.discover()
    outcome = host.enable("p", consent=Asked(answer))
    assert not outcome
    assert outcome.reason.endswith("consent was not given, so it was not enabled")
    assert host.worker_pid("p") is None


def test_consent_true_is_the_callers_decision(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    host.discover()
    assert host.enable("p", consent=True)
    assert host.call("p", "main.run", 1) == {"args": [1], "config": {}}
    [consent] = [d for d in host.manager.store.decisions("p") if d.action == "consent"]
    assert consent.detail.startswith("by consent=True: plugin 'p' is not approved")
    assert not host.is_approved("p"), "consent is for this process, never an approval"


def test_a_consent_of_the_wrong_type_is_a_type_error(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    host.discover()
    with pytest.raises(TypeError, match=r"consent=\.\.\.\) takes a callback or True/False"):
        host.enable("p", consent="yes")  # type: ignore[arg-type]


def test_an_approved_plugin_needs_no_consent(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    approve(host, "p")
    asked = Asked(answer=False)
    assert host.enable("p", consent=asked)
    assert asked.requests == [], "never asked: the approval is the consent"
    assert host.consent_request("p") is None


def test_a_reconfiguration_asks_again_only_when_the_grants_change(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    make_plugin(
        "reader",
        extra=rooted("fs.read"),
    )
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    host.discover()
    asked = Asked()
    assert host.enable("reader", [f"root={tmp_path / 'a'}"], consent=asked)
    assert host.enable("reader", [f"root={tmp_path / 'a'}"], consent=asked)
    assert len(asked.requests) == 1, "same content, same grants: the consent holds"
    assert host.enable("reader", [f"root={tmp_path / 'b'}"], consent=asked)
    assert len(asked.requests) == 2, "another path is another grant"
    assert asked.requests[1].granted is not None
    assert [str(c) for c in asked.requests[1].granted] == [f"fs.read:{tmp_path / 'b'}"]
    host.disable("reader")
    assert not host.enable("reader", [f"root={tmp_path / 'b'}"])


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


def test_the_request_shows_the_canary_status_of_a_deep_audit(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    llm: LLMServer,
) -> None:
    provider = OpenAIProvider(
        ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url=llm.url)
    )
    make_plugin("p")
    asked = Asked()
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=provider, loading=PLAIN
    ) as h:
        assert h.enable("p", consent=asked)
    provider.close()
    [request] = asked.requests
    assert request.audit.canary_status is CanaryStatus.OK
    assert request.audit.model_id == "openai:m"


# -- widening after an approval: always fresh consent -------------------------------------------


def _change(directory: Path, **fields: str) -> None:
    """Rewrite the manifest's top-level fields of the plugin in *directory*."""
    lines = (directory / "plugin.toml").read_text().splitlines()
    kept = [ln for ln in lines if not any(ln.startswith(f"{k} =") for k in fields)]
    head = [f"{k} = {v}" for k, v in fields.items()]
    (directory / "plugin.toml").write_text("\n".join(head + kept) + "\n")


def test_a_capability_gained_after_approval_is_an_escalation_without_consent(
    host: PluginHost, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: the next enable re-audited and enabled it, and it returned the secret."""
    monkeypatch.setenv("CAPLET_TEST_SECRET", "s3cr3t")
    directory = make_plugin("p", extra='capabilities = ["env.read:LANG"]')
    approve(host, "p")
    (directory / "plugin.py").write_text(READS_SECRET)
    _change(directory, capabilities='["env.read:LANG", "env.read:CAPLET_TEST_SECRET"]')
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "plugin 'p' changed since its approval of sha256-" in outcome.reason
    assert "asks for more: adds capability env.read:CAPLET_TEST_SECRET" in outcome.reason
    assert "needs a person's consent" in outcome.reason
    assert host.worker_pid("p") is None, "the secret was never read"
    asked = Asked(answer=False)
    assert not host.enable("p", consent=asked)
    [request] = asked.requests
    assert request.reason is ConsentReason.WIDENED
    assert request.widening is not None
    assert [c.declared for c in request.widening.added] == ["env.read:CAPLET_TEST_SECRET"]
    assert request.approval is not None
    # With a person's consent it runs, with what was consented to.
    assert host.enable("p", consent=True)
    assert host.call("p", "main.run") == "s3cr3t"


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        (
            '["fs.read:{root}/data/sub"]',
            '["fs.read:{root}/data"]',
            "adds capability fs.read:{root}/data",
        ),
        (
            '["net.http:https://api.example.com/v1"]',
            '["net.http:https://api.example.com"]',
            "adds capability net.http:https://api.example.com",
        ),
        (
            '["net.http:https://api.example.com"]',
            '["net.http:https://*.example.com"]',
            "adds capability net.http:https://*.example.com",
        ),
    ],
    ids=["broader-path", "broader-url", "wildcard-host"],
)
def test_a_broader_path_or_origin_needs_consent(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    before: str,
    after: str,
    shown: str,
) -> None:
    # The paths exist: a grant that does not is refused before consent is asked.
    (tmp_path / "data" / "sub").mkdir(parents=True)
    before, after, shown = (
        text.replace("{root}", str(tmp_path)) for text in (before, after, shown)
    )
    directory = make_plugin("p", extra=f"capabilities = {before}")
    approve(host, "p")
    _change(directory, capabilities=after)
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert shown in outcome.reason


TEMPLATED = """
name = "reader"
version = "{version}"
description = "Reaches what its configuration names."
capabilities = ["{capability}"]

[config.{field}]
type = "string"
description = "What it reaches"
{default}

[modules.main]
functions = ["run"]
"""


NOTES_MANIFEST = """
name = "notes"
version = "1.0.0"
description = "Reads notes."
capabilities = ["env.read:CAPLET_TEST_SECRET"]

[modules.main]
functions = ["run"]
"""


def _project(root: Path, source: str) -> Path:
    """A project's plugins directory holding a plugin ``notes`` with *source*."""
    plugin = root / "plugins" / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.toml").write_text(NOTES_MANIFEST)
    (plugin / "plugin.py").write_text(source)
    return root / "plugins"


@pytest.mark.security
def test_a_plugin_of_the_same_name_elsewhere_is_another_plugin_not_a_new_version(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attack13d: approvals are kept per user (the state directory), by plugin name. The
    operator approved project X's `notes`; project Y (a cloned repository, another
    author) has a plugin named `notes` too, other code, the same manifest. Enabled in Y
    on a pipe, it ran, "carried over: nothing widened", with the grant approved for X's
    (and X's `ctx.kv`, kept by name): the carry-over meant for a new version of the same
    plugin took another plugin for one."""
    monkeypatch.setenv("CAPLET_TEST_SECRET", "s3cr3t")
    theirs = READS_SECRET.replace("return os.environ", 'return "project Y: " + os.environ')
    plugins = {"x": _project(tmp_path / "x", READS_SECRET), "y": _project(tmp_path / "y", theirs)}
    hosts = {
        key: PluginHost(
            directory,
            state_dir=state_dir,
            launcher=launcher,
            discover=False,
            auditor=None,
            loading=PLAIN,
        )
        for key, directory in plugins.items()
    }
    try:
        approve(hosts["x"], "notes")
        here = hosts["y"]
        here.discover()
        outcome = here.enable("notes")
        assert not outcome, "another folder's plugin ran on X's approval"
        where_y = plugins["y"].resolve() / "notes"
        where_x = plugins["x"].resolve() / "notes"
        shown = (
            f"is another plugin of that name: it is at {where_y}, the approval is of the one at "
            f"{where_x}"
        )
        assert shown in outcome.reason
        asked = Asked(answer=True)
        assert here.enable("notes", consent=asked)
        [request] = asked.requests
        assert request.reason is ConsentReason.WIDENED
        assert request.widening is not None
        assert request.widening.moved == (str(where_y), str(where_x))
        assert describe_widening(request.widening) == [shown]
        # Near misses: a new version of X's own plugin, in its folder, carries over...
        source = plugins["x"] / "notes" / "plugin.py"
        source.write_text(source.read_text() + "\n# a fix\n")
        hosts["x"].discover()
        fixed = hosts["x"].enable("notes")
        assert fixed, fixed.reason
        assert "carried over: nothing widened" in fixed.reason
        record = hosts["x"].get_approval_record("notes")
        assert record is not None
        assert record.location == str(where_x)
    finally:
        for host in hosts.values():
            host.close()


def test_an_approval_older_than_its_location_carries_over_as_before(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """Near miss: an approval recorded before caplet kept where the plugin was (schema 7)
    is compared with no place, so a fix of the same plugin still carries it over."""
    directory = make_plugin("notes", manifest=NOTES_MANIFEST, source=READS_SECRET)
    approve(host, "notes")
    record = host.get_approval_record("notes")
    assert record is not None
    host.manager.store.put_approval(dataclasses.replace(record, location=None))
    source = directory / "plugin.py"
    source.write_text(source.read_text() + "\n# a fix\n")
    host.discover()
    outcome = host.enable("notes")
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason


def templated(capability: str, field: str, default: str | None, version: str = "1.0.0") -> str:
    """A manifest with one templated capability over config field *field* (no default: None)."""
    line = "" if default is None else f'default = "{default}"'
    return TEMPLATED.format(capability=capability, field=field, default=line, version=version)


def granted(host: PluginHost, name: str) -> list[str]:
    return [str(c) for c in host.manager.require_plugin(name).capabilities]


# Red-team finding 8: the approver saw a templated capability with the
# default it resolved to; the author's next version keeps the capability
# string and moves only the default. Each row: capability, field, the
# approved default, the new one.
CHANGED_DEFAULTS = [
    pytest.param("fs.read:${config.root}", "root", "{data}", "/etc", id="fs.read"),
    pytest.param(
        "net.http:${config.endpoint}",
        "endpoint",
        "https://api.example.com",
        "https://collector.example.net",
        id="net.http",
    ),
    pytest.param(
        "env.read:${config.variable}", "variable", "LANG", "CAPLET_TEST_SECRET", id="env.read"
    ),
]


@pytest.mark.parametrize(("capability", "field", "before", "after"), CHANGED_DEFAULTS)
def test_a_changed_default_behind_a_templated_grant_needs_consent(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    capability: str,
    field: str,
    before: str,
    after: str,
) -> None:
    # An application that relies on the defaults enabled the new version
    # without a word, and the plugin listed /etc (or posted to another
    # origin, or read another variable).
    data = tmp_path / "data"
    data.mkdir()
    before = before.replace("{data}", str(data))
    make_plugin("reader", manifest=templated(capability, field, before))
    approve(host, "reader")
    make_plugin("reader", manifest=templated(capability, field, after, version="1.1.0"))
    host.discover()
    outcome = host.enable("reader")
    assert not outcome, outcome.reason
    shown = f"{capability} now defaults to {after} (approved: {before})"
    assert "plugin 'reader' changed since its approval of sha256-" in outcome.reason
    assert f"asks for more: {shown}" in outcome.reason
    assert "needs a person's consent" in outcome.reason
    assert host.worker_pid("reader") is None
    asked = Asked(answer=False)
    assert not host.enable("reader", consent=asked)
    [request] = asked.requests
    assert request.reason is ConsentReason.WIDENED
    assert request.widening is not None
    assert request.widening.widens
    assert describe_widening(request.widening) == [shown]
    [change] = request.widening.defaults
    kind = capability.partition(":")[0]
    assert change.capability.declared == capability
    assert str(change.now) == f"{kind}:{after}"
    assert change.approved is not None
    assert str(change.approved) == f"{kind}:{before}"
    assert change.fields == (field,)
    # The approval recorded what the approver saw.
    record = host.get_approval_record("reader")
    assert record is not None
    assert record.defaults == ((field, before),)


class Answers:
    """A prompter that answers every field with *answer* ("" takes what is offered)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        del plugin, field, current
        return self.answer


@pytest.mark.security
def test_a_blank_answer_at_a_prompt_is_the_authors_default_not_the_operators_value(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """Red-team round 4: a `prompt = true` field whose default moved to /etc; a prompter
    that answered "" (take what is offered: an application's, or one on a closed stdin)
    made the moved default count as the operator's own value, the approval carried over
    and the plugin listed /etc."""
    data = tmp_path / "data"
    data.mkdir()

    def prompted(default: str, version: str) -> str:
        manifest = templated("fs.read:${config.root}", "root", default, version=version)
        return manifest.replace("[modules.main]", "prompt = true\n\n[modules.main]")

    make_plugin("reader", manifest=prompted(str(data), "1.0.0"))
    approve(host, "reader")
    make_plugin("reader", manifest=prompted("/etc", "1.1.0"))
    host.discover()
    outcome = host.enable("reader", prompter=Answers(""))
    assert not outcome, outcome.reason
    assert f"fs.read:${{config.root}} now defaults to /etc (approved: {data})" in outcome.reason
    assert host.worker_pid("reader") is None
    # A value typed at the prompt is the operator's, as an inline one is.
    typed = host.enable("reader", prompter=Answers(str(data)))
    assert typed, typed.reason
    assert granted(host, "reader") == [f"fs.read:{data}"]


@pytest.mark.parametrize(
    ("capability", "field", "before", "after"),
    [
        pytest.param("fs.read:${config.root}", "root", "{data}", "{data}/sub", id="fs.read"),
        pytest.param(
            "net.http:${config.endpoint}",
            "endpoint",
            "https://api.example.com",
            "https://api.example.com/v2",
            id="net.http",
        ),
    ],
)
def test_a_default_that_goes_narrower_widens_no_grant_but_is_new_text_for_the_agent(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    capability: str,
    field: str,
    before: str,
    after: str,
) -> None:
    # Inside what the approved default reached: the approval covers the grant, as it
    # covers a narrower literal capability (docs/security.md, "Consent model"). But the
    # agent reads the value in its system message, so the new value is text nobody
    # vouched for (attack13d: tests/_host/test_agent_text.py), shown as such.
    (tmp_path / "data" / "sub").mkdir(parents=True)
    before, after = (text.replace("{data}", str(tmp_path / "data")) for text in (before, after))
    make_plugin("reader", manifest=templated(capability, field, before))
    approve(host, "reader")
    make_plugin("reader", manifest=templated(capability, field, after, version="1.1.0"))
    host.discover()
    request = host.consent_request("reader")
    assert request is not None
    assert request.reason is ConsentReason.WIDENED
    assert request.widening is not None
    assert request.widening.defaults == ()
    assert request.widening.capabilities.added == ()
    assert describe_widening(request.widening) == [
        "changes the text it sends to the agent (1 removed, 1 added)",
        f'agent text removed: config {field} default: "{before}"',
        f'agent text added: config {field} default: "{after}"',
    ]
    assert not host.enable("reader", consent=Asked(answer=False))
    outcome = host.enable("reader", consent=Asked(answer=True))
    assert outcome, outcome.reason
    assert granted(host, "reader") == [f"{capability.partition(':')[0]}:{after}"]
    # The operator naming that value is the operator's text, not the author's.
    host.disable("reader")
    outcome = host.enable("reader", [f"{field}={after}"], consent=Asked(answer=False))
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason


def test_a_default_where_the_approval_had_none_needs_consent(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    # Approved without a default, the path was the operator's to set; a
    # default now lets the author pick it for every application that sets none.
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", None))
    approve(host, "reader")
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", "/etc", "1.1.0"))
    host.discover()
    outcome = host.enable("reader")
    assert not outcome
    assert (
        "asks for more: fs.read:${config.root} now defaults to /etc "
        "(approved: no default, the value was the operator's to set)"
    ) in outcome.reason
    record = host.get_approval_record("reader")
    assert record is not None
    assert record.defaults == (("root", None),)


def test_a_removed_default_needs_the_operators_value_not_consent(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # The field became required: nothing reaches anything until the operator
    # names a value, and the operator's own value is theirs to choose.
    data = tmp_path / "data"
    other = tmp_path / "other"
    data.mkdir()
    other.mkdir()
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", str(data)))
    approve(host, "reader")
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", None, "1.1.0"))
    host.discover()
    assert host.consent_request("reader") is None
    outcome = host.enable("reader")
    assert not outcome
    assert "config field(s) root have no value and no default" in outcome.reason
    assert "consent" not in outcome.reason
    outcome = host.enable("reader", [f"root={other}"])
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason
    assert granted(host, "reader") == [f"fs.read:{other}"]


def test_the_operators_own_value_is_not_the_authors_default(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # Only the default moved, and the operator configured the field: the
    # approval of fs.read:${config.root} lets the operator choose the root
    # (it does for the approved content too), so nothing widened.
    data = tmp_path / "data"
    other = tmp_path / "other"
    data.mkdir()
    other.mkdir()
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", str(data)))
    approve(host, "reader")
    make_plugin("reader", manifest=templated("fs.read:${config.root}", "root", "/etc", "1.1.0"))
    host.discover()
    assert host.consent_request("reader") is not None, "asked before configuration: the default"
    assert host.manager.apply_inline_config("reader", [f"root={other}"]).applied == ("root",)
    assert host.consent_request("reader") is None
    outcome = host.enable("reader", consent=Asked(answer=False))
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason
    assert granted(host, "reader") == [f"fs.read:{other}"]


def test_a_default_of_one_field_is_judged_with_the_operators_value_of_another(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    manifest = (
        'name = "client"\nversion = "{version}"\ndescription = "d"\n'
        'capabilities = ["net.http:https://${{config.host}}:${{config.port}}"]\n'
        '[config.host]\ntype = "string"\n'
        '[config.port]\ntype = "integer"\ndefault = {port}\n'
        '[modules.main]\nfunctions = ["run"]\n'
    )
    make_plugin("client", manifest=manifest.format(version="1.0.0", port=443))
    approve(host, "client")
    make_plugin("client", manifest=manifest.format(version="1.1.0", port=8443))
    host.discover()
    host.manager.apply_inline_config("client", ["host=api.example.com"])
    outcome = host.enable("client")
    assert not outcome
    assert (
        "net.http:https://${config.host}:${config.port} now defaults to "
        "https://api.example.com:8443 (approved: https://api.example.com)"
    ) in outcome.reason


def test_an_approval_that_predates_recorded_defaults_cannot_vouch_for_a_defaulted_grant(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # Approvals written before caplet recorded defaults (schema 4) say nothing
    # about them: any change of content asks again for a grant that takes a
    # default, even one that did not move.
    data = tmp_path / "data"
    data.mkdir()
    directory = make_plugin(
        "reader", manifest=templated("fs.read:${config.root}", "root", str(data))
    )
    approve(host, "reader")
    record = host.get_approval_record("reader")
    assert record is not None
    host.manager.store.put_approval(dataclasses.replace(record, defaults=None))
    (directory / "plugin.py").write_text((directory / "plugin.py").read_text() + "\n# fix\n")
    host.discover()
    request = host.consent_request("reader")
    assert request is not None
    assert request.reason is ConsentReason.UNKNOWN_DEFAULTS
    assert "predates caplet recording the defaults of templated capabilities" in request.why
    assert (
        f"fs.read:${{config.root}} now defaults to {data} (approved: unknown, the approval "
        "predates caplet recording defaults)"
    ) in request.why
    outcome = host.enable("reader")
    assert not outcome
    assert "needs a person's consent" in outcome.reason
    # The operator's own value needs no default to be vouched for.
    outcome = host.enable("reader", [f"root={data}"])
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason


def test_an_approval_that_predates_recorded_defaults_still_carries_literal_grants(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    # Without a templated capability there is no default to vouch for.
    directory = make_plugin("p", extra='capabilities = ["env.read:LANG"]')
    approve(host, "p")
    record = host.get_approval_record("p")
    assert record is not None
    assert record.defaults == ()
    host.manager.store.put_approval(dataclasses.replace(record, defaults=None))
    (directory / "plugin.py").write_text((directory / "plugin.py").read_text() + "\n# fix\n")
    host.discover()
    outcome = host.enable("p")
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason


def test_a_new_requirement_needs_consent(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("lib")
    directory = make_plugin("app")
    approve(host, "app")
    assert host.enable("lib", consent=True)
    _change(directory, requires='["lib"]')
    host.discover()
    outcome = host.enable("app")
    assert not outcome
    assert "now requires plugin 'lib'" in outcome.reason


def test_a_new_hook_subscription_needs_consent(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """A later version that subscribes to an application event it never had (here every
    saved document) is enabled on the earlier approval: new data reaches the plugin,
    with its approved egress, and nobody was asked."""
    directory = make_plugin("p", modules='[modules.main]\nfunctions = ["run"]\n')
    approve(host, "p")
    manifest = directory / "plugin.toml"
    manifest.write_text(manifest.read_text() + '\n[hooks]\n"content:afterSave" = "main.run"\n')
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "now subscribes to application event 'content:afterSave'" in outcome.reason


def test_the_approved_hook_subscriptions_carry_over(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """The same subscriptions in a later content widen nothing; one more does."""
    hooks = '\n[hooks]\n"content:afterSave" = "main.run"\n'
    directory = make_plugin("p", modules='[modules.main]\nfunctions = ["run"]\n' + hooks)
    approve(host, "p")
    plugin = directory / "plugin.py"
    plugin.write_text(plugin.read_text() + "\n# a comment: new content, same subscriptions\n")
    host.discover()
    outcome = host.enable("p")
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason
    host.disable("p")
    manifest = directory / "plugin.toml"
    manifest.write_text(manifest.read_text() + '"user:login" = "main.run"\n')
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "now subscribes to application event 'user:login'" in outcome.reason
    assert "content:afterSave" not in outcome.reason


def test_an_approval_that_predates_recorded_hooks_vouches_for_no_subscription(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """Schema 5 approvals have no hooks: a changed content with any subscription asks
    again; one without carries over as before."""
    hooks = '\n[hooks]\n"content:afterSave" = "main.run"\n'
    directory = make_plugin("p", modules='[modules.main]\nfunctions = ["run"]\n' + hooks)
    approve(host, "p")
    record = host.manager.store.get_approval("p")
    assert record is not None
    assert record.hooks == ("content:afterSave@500",)  # the event and its place (steer31)
    host.manager.store.put_approval(dataclasses.replace(record, hooks=None))
    plugin = directory / "plugin.py"
    plugin.write_text(plugin.read_text() + "\n# new content\n")
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "now subscribes to application event 'content:afterSave'" in outcome.reason
    # ... and a plugin without hooks carries such an approval over as before
    plain = make_plugin("q", modules='[modules.main]\nfunctions = ["run"]\n')
    approve(host, "q")
    record = host.manager.store.get_approval("q")
    assert record is not None
    host.manager.store.put_approval(dataclasses.replace(record, hooks=None))
    (plain / "plugin.py").write_text((plain / "plugin.py").read_text() + "\n# new content\n")
    host.discover()
    outcome = host.enable("q")
    assert outcome, outcome.reason
    assert "carried over: nothing widened" in outcome.reason


def test_a_downgrade_needs_consent(host: PluginHost, make_plugin: PluginFactory) -> None:
    """Issue 14: 1.0.0 -> 0.1.0 was accepted without a word."""
    directory = make_plugin("p")
    approve(host, "p")
    _change(directory, version='"0.1.0"')
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "goes down from version 1.0.0 to 0.1.0" in outcome.reason


def test_a_higher_audited_risk_needs_consent(host: PluginHost, make_plugin: PluginFactory) -> None:
    directory = make_plugin("p", extra='capabilities = ["proc.exec:git"]')
    (directory / "plugin.py").write_text(
        "def create_functions(config):\n    return {'main': {'run': lambda: 1}}\n"
    )
    approve(host, "p")
    assert host.get_approval_record("p").risk_level is RiskLevel.LOW  # type: ignore[union-attr]
    (directory / "plugin.py").write_text(
        "import subprocess\n\ndef create_functions(config):\n"
        "    return {'main': {'run': lambda: subprocess.run(['git']).returncode}}\n"
    )
    host.discover()
    outcome = host.enable("p")
    assert not outcome
    assert "was approved at risk LOW, is now audited MEDIUM" in outcome.reason


def test_narrowing_is_enabled_on_the_approvals_consent(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p", extra='capabilities = ["env.read:LANG", "env.read:TZ"]')
    approve(host, "p")
    old = host.get_approval_record("p")
    assert old is not None
    _change(directory, capabilities='["env.read:LANG"]', version='"1.1.0"')
    host.discover()
    assert host.consent_request("p") is None
    outcome = host.enable("p")
    assert outcome, outcome.reason
    assert f"approval of {old.content_hash} carried over: nothing widened" in outcome.reason
    assert not host.is_approved("p"), "the approval still names the old content"


def test_an_approval_that_predates_versions_cannot_vouch_for_new_content(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p")
    approve(host, "p")
    record = host.get_approval_record("p")
    assert record is not None
    host.manager.store.put_approval(dataclasses.replace(record, version=None, requires=None))
    (directory / "plugin.py").write_text((directory / "plugin.py").read_text() + "\n# fix\n")
    host.discover()
    request = host.consent_request("p")
    assert request is not None
    assert request.reason is ConsentReason.UNKNOWN_SCOPE
    assert "predates caplet recording the version and requirements approved" in request.why
    assert not host.enable("p")


def test_the_preview_is_none_when_the_enable_would_be_refused_anyway(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "shell",
        source="import subprocess\n\ndef create_functions(config):\n"
        "    return {'main': {'run': lambda: subprocess.run(['sh'])}}\n",
    )
    host.discover()
    assert host.consent_request("shell") is None
    outcome = host.enable("shell", consent=True)
    assert not outcome
    assert "danger finding" in outcome.reason, "consent never overrides the danger gate"


def test_consent_for_content_that_changed_after_it_was_shown_is_refused(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p")
    host.discover()
    request = host.consent_request("p")
    assert request is not None
    shown = request.content_hash
    (directory / "plugin.py").write_text((directory / "plugin.py").read_text() + "\n# swap\n")
    outcome = host.enable("p", consent=lambda asked: asked.content_hash == shown)
    assert not outcome
    assert outcome.reason.endswith("consent was not given, so it was not enabled")


# -- locked mode ---------------------------------------------------------------------------------


def test_in_locked_mode_the_lock_entry_is_the_consent(
    plugins_dir: Path, state_dir: Path, tmp_path: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, auditor=None) as m:
        m.discover()
        m.audit("p")
        assert m.approve("p")
        entry = m.lock_entry("p")
        update_lockfile(m.lockfile_path, lambda lock: lock.with_entry(entry))
    with PluginManager(
        plugins_dir,
        state_dir=tmp_path / "ci",
        loading=LoadingRules(locked=True),
        auditor=None,
    ) as ci:
        ci.discover()
        assert ci.consent_request("p") is None
        asked = Asked(answer=False)
        assert ci.enable("p", consent=asked)
        assert asked.requests == []


# -- the diff itself -------------------------------------------------------------------------------


def test_widening_of_a_manifest(make_plugin: PluginFactory) -> None:
    directory = make_plugin(
        "p",
        manifest=(
            'name = "p"\nversion = "2.0.0"\ndescription = "d"\n'
            'capabilities = ["env.read:A", "fs.read:/srv/x/y"]\nrequires = ["lib>=1", "db"]\n'
            '[modules.main]\nfunctions = ["run"]\n'
        ),
    )
    manifest = load_manifest(directory)
    approved = [parse_capability("env.read:A"), parse_capability("fs.read:/srv/x")]
    text = agent_text(manifest)
    same = widening(
        approved,
        ["lib", "db"],
        "2.0.0",
        manifest,
        approved_defaults=(),
        approved_hooks=(),
        approved_agent_text=text,
    )
    assert not same.widens, "a path inside an approved directory is covered"
    wider = widening(
        approved[:1],
        ["lib"],
        "3.0.0",
        manifest,
        approved_defaults=(),
        approved_hooks=(),
        approved_agent_text=text,
        approved_risk=RiskLevel.LOW,
        risk=RiskLevel.HIGH,
    )
    assert describe_widening(wider) == [
        "adds capability fs.read:/srv/x/y",
        "now requires plugin 'db'",
        "goes down from version 3.0.0 to 2.0.0",
        "was approved at risk LOW, is now audited HIGH",
    ]
    assert wider.escalates
    assert wider.added == wider.capabilities.added
    assert is_downgrade("1.0.0", "0.1.0")
    assert not is_downgrade("1.0", "1.0.0")
    assert not is_downgrade("not a version", "1.0")
    # attack29: a release segment past int()'s digit limit is no InvalidVersion.
    assert not is_downgrade("9" * 5_000, "1.0")
