"""Hooks: PluginHost.define_hook / emit with real sandboxed plugins."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from caplet import (
    ErrorPolicy,
    Hook,
    HookCallStatus,
    HookError,
    HookFailedError,
    HookPayloadError,
    HookState,
    PluginHost,
    PluginManager,
)
from caplet._host._hooks import order_subscribers
from caplet._host._loading import LoadingRules
from caplet._trust._lockfile import Lockfile, update_lockfile
from tests.conftest import PluginFactory

EVENT = "content:afterSave"

#: Every hook plugin has these handlers; the manifest picks the one its hook uses.
SOURCE = """
def create_functions(config):
    def handle(payload):
        return {"plugin": "NAME", "payload": payload}

    def boom(payload):
        raise RuntimeError("refused item " + str(payload["id"]))

    def spin(payload):
        while True:
            pass

    def number(payload):
        return 42

    return {"main": {"handle": handle, "boom": boom, "spin": spin, "number": number}}
"""


def hook_plugin(
    make_plugin: PluginFactory,
    name: str,
    *,
    handler: str = "handle",
    priority: int | None = None,
    requires: Sequence[str] = (),
    capabilities: Sequence[str] = (),
    capability: str | None = None,
    event: str = EVENT,
    limits: str = "",
) -> Path:
    """A plugin subscribed to *event* with ``main.<handler>``."""
    table = f'[hooks."{event}"]\nfunction = "main.{handler}"\n'
    if priority is not None:
        table += f"priority = {priority}\n"
    if capability is not None:
        table += f'capability = "{capability}"\n'
    extra = f"requires = {list(requires)!r}\ncapabilities = {list(capabilities)!r}\n".replace(
        "'", '"'
    )
    modules = f'[modules.main]\nfunctions = ["handle", "boom", "spin", "number"]\n{table}{limits}'
    return make_plugin(name, source=SOURCE.replace("NAME", name), extra=extra, modules=modules)


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


def enable_all(host: PluginHost, *names: str) -> None:
    host.discover()
    for name in names:
        outcome = host.enable(name, consent=True)
        assert outcome, outcome.reason


def hook_decisions(host: PluginHost, name: str) -> list[tuple[str, bool, str]]:
    return [
        (d.target, d.allowed, d.detail)
        for d in reversed(host.manager.store.decisions(name))
        if d.action == "hook"
    ]


# -- ordering ------------------------------------------------------------------------------


def test_priority_order_with_dependencies_first(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "base", priority=900)
    make_plugin("middle", extra='requires = ["base"]')  # not subscribed
    hook_plugin(make_plugin, "late-dependant", priority=100, requires=["middle"])
    hook_plugin(make_plugin, "mid", priority=500)
    hook_plugin(make_plugin, "early-b", priority=100)
    hook_plugin(make_plugin, "early-a", priority=100)
    hook_plugin(make_plugin, "default")
    enable_all(host, "base", "middle", "late-dependant", "mid", "early-b", "early-a", "default")
    host.define_hook(EVENT)
    results = host.emit(EVENT, {"id": 1})
    # Lower priority first, ties by name, and a dependant (through a plugin
    # that does not subscribe) after its dependency even with a lower priority.
    assert [(c.plugin, c.priority) for c in results] == [
        ("early-a", 100),
        ("early-b", 100),
        ("default", 500),
        ("mid", 500),
        ("base", 900),
        ("late-dependant", 100),
    ]
    assert results.ok
    assert results.values["mid"] == {"plugin": "mid", "payload": {"id": 1}}
    assert results["base"].status is HookCallStatus.OK
    assert "middle" not in [c.plugin for c in results]


def test_order_subscribers_is_total_and_transitive() -> None:
    def hook(priority: int) -> Hook:
        return Hook(EVENT, "main", "handle", priority=priority)

    requires = {"c": ("x",), "x": ("a",), "b": ()}
    subscribers = [("c", hook(0)), ("b", hook(10)), ("a", hook(20))]
    order = order_subscribers(subscribers, requires)
    assert [name for name, _ in order] == ["b", "a", "c"]


def test_only_enabled_plugins_are_called(host: PluginHost, make_plugin: PluginFactory) -> None:
    hook_plugin(make_plugin, "on")
    hook_plugin(make_plugin, "off")
    enable_all(host, "on")
    host.define_hook(EVENT)
    assert [c.plugin for c in host.emit(EVENT, {"id": 1})] == ["on"]


# -- error policies ------------------------------------------------------------------------


def three_plugins(host: PluginHost, make_plugin: PluginFactory) -> None:
    hook_plugin(make_plugin, "first", priority=1)
    hook_plugin(make_plugin, "failing", priority=2, handler="boom")
    hook_plugin(make_plugin, "last", priority=3)
    enable_all(host, "first", "failing", "last")


def test_continue_collects_an_error_and_calls_the_rest(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    three_plugins(host, make_plugin)
    host.define_hook(EVENT, error_policy=ErrorPolicy.CONTINUE)
    results = host.emit(EVENT, {"id": 7})
    assert [(c.plugin, c.status) for c in results] == [
        ("first", HookCallStatus.OK),
        ("failing", HookCallStatus.FAILED),
        ("last", HookCallStatus.OK),
    ]
    failed = results["failing"]
    assert "raised RuntimeError: refused item 7" in failed.error
    assert failed.error_type == "PluginCallError"
    assert not results
    assert results.aborted_by is None
    assert [c.plugin for c in results.errors] == ["failing"]
    assert list(results.values) == ["first", "last"]
    with pytest.raises(
        HookFailedError,
        match=r"event 'content:afterSave': 1 plugin\(s\) failed: "
        r"failing \(failed\): .*refused item 7",
    ) as info:
        results.raise_for_errors()
    assert info.value.plugins == ("failing",)
    # Every subscriber's outcome is on record.
    assert hook_decisions(host, "first") == [(f"{EVENT} -> main.handle", True, "ok (priority 1)")]
    ((target, allowed, detail),) = hook_decisions(host, "failing")
    assert (target, allowed) == (f"{EVENT} -> main.boom", False)
    assert detail.startswith("failed: ")
    assert "refused item 7" in detail


def test_abort_stops_at_the_first_error_and_names_it(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    three_plugins(host, make_plugin)
    host.define_hook(EVENT, error_policy="abort")
    results = host.emit(EVENT, {"id": 7})
    assert [(c.plugin, c.status) for c in results] == [
        ("first", HookCallStatus.OK),
        ("failing", HookCallStatus.FAILED),
        ("last", HookCallStatus.NOT_RUN),
    ]
    assert results.aborted_by == "failing"
    assert results.error_policy is ErrorPolicy.ABORT
    assert results["last"].error == (
        "not run: 'failing' failed first and 'content:afterSave' aborts on the first error"
    )
    with pytest.raises(HookFailedError, match="1 plugin\\(s\\) failed, which aborted the event"):
        results.raise_for_errors()
    assert hook_decisions(host, "last") == [
        (
            f"{EVENT} -> main.handle",
            False,
            "not-run: not run: 'failing' failed first and 'content:afterSave' aborts on the "
            "first error",
        )
    ]


def test_a_hanging_hook_is_killed_by_its_timeout_while_the_others_run(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "before", priority=1)
    hook_plugin(
        make_plugin, "hangs", priority=2, handler="spin", limits="[limits]\ntimeout_ms = 300\n"
    )
    hook_plugin(make_plugin, "after", priority=3)
    enable_all(host, "before", "hangs", "after")
    hung_pid = host.worker_pid("hangs")
    host.define_hook(EVENT)
    results = host.emit(EVENT, {"id": 1})
    assert [(c.plugin, c.status) for c in results] == [
        ("before", HookCallStatus.OK),
        ("hangs", HookCallStatus.TIMED_OUT),
        ("after", HookCallStatus.OK),
    ]
    assert "timed out after 300 ms" in results["hangs"].error
    assert results["hangs"].error_type == "CallTimeoutError"
    assert host.worker_pid("hangs") is None, "the hung worker was killed"
    assert not Path(f"/proc/{hung_pid}").exists()
    assert host.breaker("hangs").failures == 1


def test_an_open_circuit_is_reported_without_calling(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    now = [1000.0]
    with PluginHost(plugins_dir, state_dir=state_dir, clock=lambda: now[0]) as host:
        hook_plugin(make_plugin, "failing", handler="boom")
        hook_plugin(make_plugin, "fine", priority=600)
        enable_all(host, "failing", "fine")
        host.define_hook(EVENT)
        for _ in range(host.policy.failure_threshold):
            assert host.emit(EVENT, {"id": 1})["failing"].status is HookCallStatus.FAILED
        results = host.emit(EVENT, {"id": 1})
        assert results["failing"].status is HookCallStatus.CIRCUIT_OPEN
        assert results["failing"].error_type == "CircuitOpenError"
        assert results["fine"].ok


# -- invalid output ------------------------------------------------------------------------


def test_a_result_the_event_schema_refuses_is_invalid_output(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "numbers", handler="number")
    hook_plugin(make_plugin, "objects", priority=600)
    enable_all(host, "numbers", "objects")
    host.define_hook(EVENT, result_schema={"type": "object"})
    results = host.emit(EVENT, {"id": 1})
    bad = results["numbers"]
    assert bad.status is HookCallStatus.INVALID_OUTPUT
    assert bad.error == (
        "plugin 'numbers': main.number returned a value the application's result_schema for "
        "'content:afterSave' refuses: at $: 42 is not of type 'object' (schema path type); "
        "make the hook return what the event expects"
    )
    assert results["objects"].ok
    assert host.breaker("numbers").failures == 1, "invalid output counts for the breaker"
    assert any(
        d.action == "output" and not d.allowed for d in host.manager.store.decisions("numbers")
    )


def test_a_result_the_functions_own_schema_refuses_is_invalid_output(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "typed",
        source=SOURCE.replace("NAME", "typed"),
        modules=(
            '[modules.main.functions.number]\nreturns = { type = "string" }\n'
            f'[hooks]\n"{EVENT}" = "main.number"\n'
        ),
    )
    enable_all(host, "typed")
    host.define_hook(EVENT)
    call = host.emit(EVENT, {"id": 1})["typed"]
    assert call.status is HookCallStatus.INVALID_OUTPUT
    assert "does not match its declared returns schema" in call.error


# -- capabilities --------------------------------------------------------------------------


def test_a_hook_whose_capability_is_not_approved_is_skipped_and_reported(
    plugins_dir: Path, state_dir: Path, tmp_path: Path, make_plugin: PluginFactory
) -> None:
    hook_plugin(
        make_plugin,
        "mailer",
        capabilities=["app:email.send"],
        capability="app:email.send",
    )
    hook_plugin(make_plugin, "plain", priority=600)
    # Approve both and pin them, withholding the mailer's capability: in
    # locked mode the lock entry is the approval.
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        for name, withhold in (("mailer", ["app:email.send"]), ("plain", [])):
            manager.audit(name)
            assert manager.approve(name)
            entry = manager.lock_entry(name, withhold=withhold)
            update_lockfile(
                manager.lockfile_path, functools.partial(Lockfile.with_entry, entry=entry)
            )
    ci_state = tmp_path / "ci-state"
    with PluginHost(plugins_dir, state_dir=ci_state, loading=LoadingRules(locked=True)) as host:
        (status,) = host.hook_status("mailer")
        assert status.state is HookState.UNAPPROVED
        assert status.reason == "not called: capability app:email.send not approved"
        enable_all(host, "mailer", "plain")
        host.define_hook(EVENT)
        results = host.emit(EVENT, {"id": 1})
        assert [(c.plugin, c.status) for c in results] == [
            ("mailer", HookCallStatus.SKIPPED),
            ("plain", HookCallStatus.OK),
        ]
        assert results.ok, "a skipped hook is a decision, not a failure"
        assert [c.plugin for c in results.skipped] == ["mailer"]
        assert results["mailer"].error == "not called: capability app:email.send not approved"
        assert hook_decisions(host, "mailer") == [
            (
                f"{EVENT} -> main.handle",
                False,
                "skipped: not called: capability app:email.send not approved",
            )
        ]
        (status,) = host.hook_status("mailer")
        assert status.state is HookState.UNAPPROVED


def test_an_event_limited_to_an_app_capability(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "reader", capabilities=["app:users.read"], event="user:created")
    hook_plugin(make_plugin, "other", event="user:created")
    enable_all(host, "reader", "other")
    host.define_hook("user:created", capability="app:users.read")
    results = host.emit("user:created", {"id": 3})
    assert results["reader"].ok
    other = results["other"]
    assert other.status is HookCallStatus.SKIPPED
    assert other.error == (
        "not called: the application delivers user:created only to plugins granted "
        "app:users.read, which is not approved for this plugin"
    )


# -- hook status ---------------------------------------------------------------------------


def test_hook_status_follows_enablement_and_the_defined_events(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "p", priority=42)
    host.discover()
    (status,) = host.hook_status("p")
    assert (status.event, status.target, status.priority, status.capability) == (
        EVENT,
        "main.handle",
        42,
        None,
    )
    assert status.state is HookState.IDLE
    assert status.reason == "not called while the plugin is discovered; called once enabled"
    enable_all(host, "p")
    host.define_hook(EVENT)
    (status,) = host.hook_status("p")
    assert (status.state, status.reason) == (HookState.ACTIVE, f"called on {EVENT}")
    hook_plugin(make_plugin, "p", event="content:aftersave")
    host.discover()
    # Enabled, it runs (and subscribes) as it was enabled, whatever the folder says now
    # (textpin: a swapped-in manifest is not consented to).
    (status,) = host.hook_status("p")
    assert (status.event, status.state) == (EVENT, HookState.ACTIVE)
    host.disable("p")
    (status,) = host.hook_status("p")
    assert status.state is HookState.UNKNOWN_EVENT
    assert status.reason == (
        "not called: the application defines no event 'content:aftersave' "
        "(did you mean 'content:afterSave'?)"
    )


def test_a_subscription_swapped_into_an_enabled_plugins_folder_is_not_called(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """The live swap (textpin): an enabled plugin without hooks, its folder rewritten to
    subscribe to every saved document and rediscovered; emit read the live manifest and
    handed the payloads to the running plugin, which nobody agreed to (red-team round 4's
    widening, without the enable that would have asked)."""
    directory = make_plugin(
        "p",
        source=SOURCE.replace("NAME", "p"),
        modules='[modules.main]\nfunctions = ["handle", "boom", "spin", "number"]\n',
    )
    enable_all(host, "p")
    host.define_hook(EVENT)
    manifest = directory / "plugin.toml"
    manifest.write_text(
        manifest.read_text() + f'[hooks."{EVENT}"]\nfunction = "main.handle"\n', encoding="utf-8"
    )
    host.discover()
    assert host.manager.require_plugin("p").enabled
    assert [c.plugin for c in host.emit(EVENT, {"id": 1})] == []
    assert host.hook_status("p") == ()
    assert not host.enable("p"), "the new subscription is a widening: consent first"
    enable_all(host, "p")
    assert [c.plugin for c in host.emit(EVENT, {"id": 2})] == ["p"]


# -- payloads and definitions --------------------------------------------------------------


def test_payload_schema_is_checked_before_any_plugin_runs(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "p")
    enable_all(host, "p")
    spec = host.define_hook(
        EVENT,
        schema={"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
    )
    assert spec.schema is not None
    assert host.hook_specs() == (spec,)
    with pytest.raises(HookPayloadError) as info:
        host.emit(EVENT, {"id": "seven"})
    assert str(info.value) == (
        "event 'content:afterSave': the payload does not match the event's schema: at $.id: "
        "'seven' is not of type 'integer' (schema path properties/id/type); no plugin was "
        "called; pass a payload that matches the schema given to define_hook"
    )
    assert info.value.schema_path == "properties/id/type"
    assert hook_decisions(host, "p") == []
    assert host.emit(EVENT, {"id": 7})["p"].ok


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (object(), "payload is a value of type object"),
        ({1: "x"}, "payload is a dict key of type int"),
        ({"a": [1, {2}]}, "payload['a'][1] is a value of type set"),
        (2**70, "payload is an int outside the 64-bit range"),
    ],
)
def test_a_payload_that_cannot_cross_is_refused(
    host: PluginHost, payload: object, problem: str
) -> None:
    host.define_hook(EVENT)
    with pytest.raises(HookPayloadError) as info:
        host.emit(EVENT, payload)
    assert str(info.value) == (
        f"event 'content:afterSave': {problem}, which cannot cross the boundary (JSON-like "
        "values, bytes, lists and dicts with string keys only); pass plain data"
    )


def test_a_payload_the_functions_args_schema_refuses_fails_that_plugin(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "strict",
        source=SOURCE.replace("NAME", "strict"),
        modules=(
            '[modules.main.functions.handle]\nargs = { type = "array", items = { type = '
            f'"string" }} }}\n[hooks]\n"{EVENT}" = "main.handle"\n'
        ),
    )
    enable_all(host, "strict")
    host.define_hook(EVENT)
    call = host.emit(EVENT, {"id": 1})["strict"]
    assert call.status is HookCallStatus.FAILED
    assert call.error_type == "LifecycleError"
    assert "do not match its declared args schema" in call.error


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"event": "afterSave"},
            "invalid event name 'afterSave'; expected '<namespace>:<event>' (letters, digits, "
            "'_' and '-'), e.g. 'content:afterSave'",
        ),
        (
            {"event": EVENT, "error_policy": "abrot"},
            "event 'content:afterSave': unknown error_policy 'abrot' (did you mean 'abort'?); "
            "expected ErrorPolicy.CONTINUE or ErrorPolicy.ABORT (continue or abort)",
        ),
        (
            {"event": EVENT, "schema": {"type": "objekt"}},
            "event 'content:afterSave': schema is not a usable JSON Schema: at $.type: ",
        ),
        (
            {"event": EVENT, "capability": "net.http:https://example.com"},
            "event 'content:afterSave': capability 'net.http:https://example.com' is a net.http "
            "capability; an event can only require an application capability (app:<name>), "
            "e.g. 'app:users.read'",
        ),
    ],
)
def test_define_hook_refuses_with_the_fix(
    host: PluginHost, kwargs: dict[str, object], message: str
) -> None:
    event = kwargs.pop("event")
    assert isinstance(event, str)
    with pytest.raises(HookError) as info:
        host.define_hook(event, **kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
    assert host.hook_specs() == ()


def test_events_are_defined_once_and_must_be_defined_to_emit(host: PluginHost) -> None:
    host.define_hook(EVENT)
    with pytest.raises(HookError, match="event 'content:afterSave' is already defined; define"):
        host.define_hook(EVENT)
    with pytest.raises(HookError) as info:
        host.emit("content:aftersave", {})
    assert str(info.value) == (
        "event 'content:aftersave' is not defined (did you mean 'content:afterSave'?); define "
        "it first with host.define_hook('content:aftersave') (defined: content:afterSave)"
    )
    assert info.value.event == "content:aftersave"


def test_emit_without_subscribers_is_empty_and_ok(host: PluginHost) -> None:
    host.define_hook(EVENT)
    results = host.emit(EVENT)
    assert results.ok
    assert len(results) == 0
    with pytest.raises(KeyError, match="plugin 'x' is not among the subscribers"):
        results["x"]
