"""The default behind a templated capability, as approved and as now (red-team finding 8).

tests/_host/test_consent.py and test_update.py run the attack end to end
(enable and ``caplet update``); here is the comparison itself, case by case.
"""

from __future__ import annotations

import pytest

from caplet._capabilities._model import Capability
from caplet._capabilities._parse import parse_capability
from caplet._host._defaults import (
    UNRECORDED,
    DefaultChange,
    Reach,
    configured_reach,
    default_changes,
    default_reach,
    template_defaults,
    template_fields,
)
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._trust._store import ApprovedDefaults
from tests.conftest import PluginFactory

ROOT = "fs.read:${config.root}"


def manifest_of(make_plugin: PluginFactory, capabilities: str, config: str) -> Manifest:
    directory = make_plugin(
        "p",
        manifest=(
            f'name = "p"\nversion = "1.0.0"\ndescription = "d"\ncapabilities = {capabilities}\n'
            f'{config}\n[modules.main]\nfunctions = ["run"]\n'
        ),
    )
    return load_manifest(directory)


def root(default: str | None) -> str:
    line = "" if default is None else f'default = "{default}"'
    return f'[config.root]\ntype = "string"\n{line}\n'


def changes(
    manifest: Manifest,
    approved: ApprovedDefaults | None,
    *,
    config: dict[str, str] | None = None,
    explicit: tuple[str, ...] = (),
) -> tuple[DefaultChange, ...]:
    return default_changes(
        manifest.capabilities, manifest, approved, config=config, explicit=explicit
    )


def test_an_approval_records_the_defaults_of_the_templated_fields_only(
    make_plugin: PluginFactory,
) -> None:
    manifest = manifest_of(
        make_plugin,
        '["fs.read:${config.root}", "net.http:https://${config.host}:${config.port}", '
        '"fs.write:${config.root}/out", "env.read:LANG"]',
        root("/srv/data")
        + '[config.host]\ntype = "string"\n'
        + '[config.port]\ntype = "number"\ndefault = 8443\n'
        + '[config.greeting]\ntype = "string"\ndefault = "hello"\n',
    )
    assert template_fields(manifest.capabilities) == ("root", "host", "port")
    # In the order the capabilities name them; no default is None; a number is a float.
    assert template_defaults(manifest) == (("root", "/srv/data"), ("host", None), ("port", 8443.0))


def test_no_templated_capability_records_nothing(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(make_plugin, '["env.read:LANG"]', root("/srv/data"))
    assert template_defaults(manifest) == ()
    assert changes(manifest, None) == (), "nothing to vouch for, even without a record"


@pytest.mark.parametrize(
    ("approved", "now", "expected"),
    [
        ("/srv/data", "/srv/data", None),
        ("/srv/data", "/srv/data/cache", None),
        ("/srv/data", "/srv/data/", None),
        ("/srv/data", "/srv", "fs.read:${config.root} now defaults to /srv (approved: /srv/data)"),
        ("/srv/data", "/", "fs.read:${config.root} now defaults to / (approved: /srv/data)"),
        ("/srv/data", "/srv/database", "now defaults to /srv/database (approved: /srv/data)"),
        (None, "/srv/data", "(approved: no default, the value was the operator's to set)"),
    ],
    ids=["same", "narrower", "respelled", "wider", "broad", "sibling-prefix", "added"],
)
def test_what_a_changed_default_widens(
    make_plugin: PluginFactory, approved: str | None, now: str, expected: str | None
) -> None:
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root(now))
    found = changes(manifest, (("root", approved),))
    if expected is None:
        assert found == ()
        return
    [change] = found
    assert expected in change.describe()
    assert change.fields == ("root",)
    assert str(change.now) == f"fs.read:{now}"


def test_a_removed_default_is_left_to_the_operator(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root(None))
    assert changes(manifest, (("root", "/srv/data"),)) == ()
    assert changes(manifest, None) == (), "no value at all: the enable asks for one"


def test_the_operators_value_is_not_compared(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("/etc"))
    approved = (("root", "/srv/data"),)
    assert changes(manifest, approved, config={"root": "/var"}, explicit=("root",)) == ()
    assert changes(manifest, None, config={"root": "/var"}, explicit=("root",)) == ()


def test_a_value_kept_from_an_earlier_enable_is_judged_like_a_default(
    make_plugin: PluginFactory,
) -> None:
    # Not the operator's: the value an earlier enable of this process completed.
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("/etc"))
    approved = (("root", "/srv/data"),)
    assert changes(manifest, approved, config={"root": "/srv/data"}) == ()
    [change] = changes(manifest, approved, config={"root": "/var"})
    assert change.describe() == "fs.read:${config.root} now defaults to /var (approved: /srv/data)"


def test_an_unrecorded_approval_cannot_vouch_for_any_default(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("/srv/data"))
    [change] = changes(manifest, None)
    assert change.unknown == UNRECORDED
    assert change.approved is None
    assert change.describe() == (
        "fs.read:${config.root} now defaults to /srv/data (approved: unknown, the approval "
        "predates caplet recording defaults)"
    )


def test_an_approved_default_that_made_no_grant_vouches_for_nothing(
    make_plugin: PluginFactory,
) -> None:
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("/srv/data"))
    [change] = changes(manifest, (("root", True),))
    assert change.unknown == "the approved default made no grant"


def test_a_new_default_that_makes_no_grant_is_left_to_the_enable(
    make_plugin: PluginFactory,
) -> None:
    # The enable refuses it with its own message (a relative path here).
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("relative/path"))
    assert changes(manifest, (("root", "/srv/data"),)) == ()


@pytest.mark.parametrize(
    ("capability", "field", "approved", "now", "widens"),
    [
        ("net.http:${config.url}", "url", "https://a.example", "https://a.example/v2", False),
        ("net.http:${config.url}", "url", "https://a.example/v2", "https://a.example", True),
        ("net.http:${config.url}", "url", "https://a.example", "https://b.example", True),
        ("net.http:${config.url}", "url", "https://a.example", "http://a.example", True),
        ("env.read:${config.name}", "name", "LANG", "LANG", False),
        ("env.read:${config.name}", "name", "LANG", "AWS_SECRET_ACCESS_KEY", True),
        ("proc.exec:${config.tool}", "tool", "git", "sh", True),
        # /srv/a/b/reports is not inside /srv/a/reports: judged as resolved, not by prefix.
        ("fs.write:${config.out}/reports", "out", "/srv/a", "/srv/a/b", True),
        ("fs.write:${config.out}/reports", "out", "/srv/a", "/srv/a/", False),
    ],
)
def test_every_templated_kind(
    make_plugin: PluginFactory,
    capability: str,
    field: str,
    approved: str,
    now: str,
    widens: bool,
) -> None:
    manifest = manifest_of(
        make_plugin,
        f'["{capability}"]',
        f'[config.{field}]\ntype = "string"\ndefault = "{now}"\n',
    )
    found = changes(manifest, ((field, approved),))
    assert bool(found) is widens
    if widens:
        assert f"{capability} now defaults to " in found[0].describe()


def test_one_field_defaulted_beside_one_the_operator_set(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(
        make_plugin,
        '["net.http:https://${config.host}:${config.port}"]',
        '[config.host]\ntype = "string"\n[config.port]\ntype = "integer"\ndefault = 8443\n',
    )
    approved = (("host", None), ("port", 443))
    set_by_operator = {"host": "api.example.com"}
    [change] = changes(manifest, approved, config=set_by_operator, explicit=("host",))
    assert change.fields == ("port",)
    assert change.describe() == (
        "net.http:https://${config.host}:${config.port} now defaults to "
        "https://api.example.com:8443 (approved: https://api.example.com)"
    )
    # Both set by the operator: nothing is the author's.
    both = {"host": "api.example.com", "port": "9000"}
    assert changes(manifest, approved, config=both, explicit=("host", "port")) == ()


def test_only_carried_capabilities_are_compared(make_plugin: PluginFactory) -> None:
    # A capability the approval does not carry is an addition (the capability
    # diff asks for it); it is not compared twice.
    manifest = manifest_of(make_plugin, f'["{ROOT}"]', root("/etc"))
    carried: tuple[Capability, ...] = (parse_capability("env.read:LANG"),)
    assert default_changes(carried, manifest, (("root", "/srv/data"),)) == ()


def test_what_an_approver_is_shown(make_plugin: PluginFactory) -> None:
    manifest = manifest_of(
        make_plugin,
        '["fs.read:${config.root}", "net.http:${config.url}", "env.read:LANG"]',
        root("/srv/data") + '[config.url]\ntype = "string"\n',
    )
    assert default_reach(manifest) == (
        ("fs.read:${config.root}", "/srv/data"),
        ("net.http:${config.url}", None),
    )


def test_configured_reach_says_what_each_template_grants_and_whose_value_it_is(
    make_plugin: PluginFactory,
) -> None:
    """What a consent shows beside a template (red-team round 4)."""
    config = root("/etc") + '[config.key]\ntype = "string"\nsecret = true\n'
    manifest = manifest_of(make_plugin, f'["{ROOT}", "env.read:${{config.key}}"]', config)
    assert configured_reach(manifest, {}) == (
        Reach(ROOT, "/etc", by_default=True),
        Reach("env.read:${config.key}", None, by_default=True, missing=("key",)),
    )
    assert configured_reach(manifest, {"root": "/srv/data", "key": "TOKEN"}) == (
        Reach(ROOT, "/srv/data", by_default=False),
        Reach("env.read:${config.key}", "TOKEN", by_default=False, secret=True),
    )
