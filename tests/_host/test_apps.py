"""Application capabilities: ``host.register_capability`` and ``ctx.app`` (issue 6, point 3)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    AppCall,
    AppError,
    CapabilityError,
    ContextLimits,
    PluginHost,
    Policy,
)
from caplet._host._apps import AppRegistry
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

EMAIL_SCHEMA = {
    "type": "object",
    "required": ["to", "subject"],
    "properties": {
        "to": {"type": "string", "pattern": "^[a-z]+@example\\.test$"},
        "subject": {"type": "string", "maxLength": 50},
    },
    "additionalProperties": False,
}


# -- registration (no worker needed) ---------------------------------------------------------


def _noop(call: AppCall) -> object:
    return None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("email.send", "must be an application capability such as 'app:email.send'"),
        ("net.http:https://x.example", "must be an application capability"),
        ("app:Email", "invalid app capability name 'Email'"),
    ],
)
def test_register_refuses_bad_names(name: str, message: str) -> None:
    with pytest.raises(CapabilityError, match=message):
        AppRegistry().register(name, _noop)


def test_register_refuses_duplicates_bad_handlers_and_bad_schemas() -> None:
    registry = AppRegistry()
    registry.register("app:email.send", _noop, schema=EMAIL_SCHEMA)
    with pytest.raises(CapabilityError, match=r"app:email\.send is already registered"):
        registry.register("app:email.send", _noop)
    with pytest.raises(CapabilityError, match="the handler for app:x must be callable"):
        registry.register("app:x", "not callable")  # type: ignore[arg-type]
    with pytest.raises(CapabilityError, match="patternProperties is not supported"):
        registry.register("app:y", _noop, schema={"patternProperties": {"a+": {}}})
    with pytest.raises(CapabilityError, match=r"the schema of app:z is not a usable JSON Schema"):
        registry.register("app:z", _noop, schema={"type": 5})
    with pytest.raises(CapabilityError, match="implies of app:w must be an application"):
        registry.register("app:w", _noop, implies=("w.read",))
    assert registry.names() == ["app:email.send"]


def test_implies_is_transitive_and_one_way() -> None:
    registry = AppRegistry()
    registry.register("app:content.admin", _noop, implies=("app:content.write",))
    registry.register("app:content.write", _noop, implies=("app:content.read",))
    assert registry.reachable({"content.admin"}) == {
        "content.admin",
        "content.write",
        "content.read",
    }
    assert registry.reachable({"content.read"}) == {"content.read"}


# -- ctx.app in the sandbox ----------------------------------------------------------------


CALLER = """
from caplet.plugin import ContextError

def create_functions(config):
    def run(ctx, name, args):
        try:
            return ["ok", ctx.app(name, args)]
        except ContextError as exc:
            return [type(exc).__name__, exc.category, str(exc)]
    return {"main": {"run": run}}
"""


class Mailer:
    """A handler recording what it was given."""

    def __init__(self) -> None:
        self.calls: list[AppCall] = []

    def __call__(self, call: AppCall) -> object:
        self.calls.append(call)
        if call.args.get("subject") == "boom":
            raise RuntimeError("SMTP password is hunter2")
        if call.args.get("subject") == "refuse":
            raise AppError("unknown recipient")
        if call.args.get("subject") == "set":
            return {1, 2}
        if call.args.get("subject") == "huge":
            return "x" * 5000
        return {"queued": True, "id": len(self.calls)}


@pytest.fixture
def mailer() -> Mailer:
    return Mailer()


@pytest.fixture
def host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    mailer: Mailer,
) -> Iterator[PluginHost]:
    plugin(make_plugin, "mail", CALLER, capabilities=("app:email.send", "app:content.write"))
    plugin(make_plugin, "reader", CALLER, capabilities=("app:content.read",))
    policy = Policy(context=ContextLimits(app_max_result_bytes=1000))
    with make_host(plugins_dir, state_dir, launcher, policy=policy) as h:
        h.register_capability("app:email.send", mailer, schema=EMAIL_SCHEMA)
        h.register_capability(
            "app:content.write", lambda call: "written", implies=("app:content.read",)
        )
        h.register_capability("app:content.read", lambda call: ["post 1", call.plugin])
        enable(h, "mail", "reader")
        yield h


def test_a_granted_call_reaches_the_handler(host: PluginHost, mailer: Mailer) -> None:
    args = {"to": "ann@example.test", "subject": "hi"}
    assert host.call("mail", "main.run", "email.send", args) == ["ok", {"queued": True, "id": 1}]
    assert mailer.calls == [AppCall("mail", "app:email.send", args)]
    decisions = [
        (d.target, d.allowed, d.detail)
        for d in host.manager.store.decisions("mail")
        if d.action == "app"
    ]
    assert decisions == [("app:email.send", True, "handled")]


def test_arguments_that_break_the_schema_never_reach_the_handler(
    host: PluginHost, mailer: Mailer
) -> None:
    for args, where in [
        ({"to": "mallory@evil.test", "subject": "hi"}, "at $.to"),
        ({"to": "ann@example.test"}, "at $: 'subject' is a required property"),
        ({"to": "ann@example.test", "subject": "hi", "bcc": "x"}, "Additional properties"),
        ("not an object", "at $: 'not an object' is not of type 'object'"),
    ]:
        error, category, message = host.call("mail", "main.run", "email.send", args)
        assert (error, category) == ("ContextArgumentError", "invalid arguments")
        assert message.startswith(
            "invalid arguments: plugin 'mail': the arguments of app:email.send do not match "
            "the application's schema: "
        )
        assert where in message
    assert mailer.calls == []
    refused = [d for d in host.manager.store.decisions("mail") if d.action == "app"]
    assert len(refused) == 4
    assert not any(d.allowed for d in refused)


def test_handler_failures_are_contained(
    host: PluginHost, mailer: Mailer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="caplet")
    boom = {"to": "ann@example.test", "subject": "boom"}
    error, category, message = host.call("mail", "main.run", "email.send", boom)
    assert (error, category) == ("AppHandlerError", "app handler failed")
    assert message == (
        "app handler failed: plugin 'mail': the application's handler for app:email.send "
        "raised RuntimeError; the host logged the details"
    )
    assert "hunter2" not in message, "the application's internals stay in the host"
    assert any(r.exc_info and "hunter2" in str(r.exc_info[1]) for r in caplog.records)
    refuse = {"to": "ann@example.test", "subject": "refuse"}
    assert host.call("mail", "main.run", "email.send", refuse) == [
        "AppError",
        "refused by the application",
        "refused by the application: plugin 'mail': app:email.send: unknown recipient",
    ]
    unsendable = {"to": "ann@example.test", "subject": "set"}
    error, _, message = host.call("mail", "main.run", "email.send", unsendable)
    assert error == "AppHandlerError"
    assert "returned a result that cannot cross the boundary" in message
    huge = {"to": "ann@example.test", "subject": "huge"}
    error, _, message = host.call("mail", "main.run", "email.send", huge)
    assert error == "AppHandlerError"
    assert "returned 5003 bytes, over the limit of 1000 bytes" in message
    ok = {"to": "ann@example.test", "subject": "fine"}
    assert host.call("mail", "main.run", "email.send", ok)[0] == "ok", "the host carries on"


def test_write_implies_read_where_the_application_says_so(host: PluginHost) -> None:
    assert host.call("mail", "main.run", "content.read", {}) == ["ok", ["post 1", "mail"]]
    assert host.call("mail", "main.run", "app:content.write", {}) == ["ok", "written"]
    assert host.call("reader", "main.run", "content.read", None) == ["ok", ["post 1", "reader"]]
    error, category, message = host.call("reader", "main.run", "content.write", {})
    assert (error, category) == ("NotGrantedError", "not granted")
    assert message == (
        "not granted: plugin 'reader' was not granted app:content.write; declare it in the "
        "manifest's capabilities and have it approved"
    )


def test_unknown_and_ungranted_capabilities(host: PluginHost, mailer: Mailer) -> None:
    error, _, message = host.call("mail", "main.run", "sms.send", {})
    assert error == "NotGrantedError"
    assert "was not granted app:sms.send" in message
    error, _, message = host.call("mail", "main.run", "Bad Name", {})
    assert error == "ContextArgumentError"
    assert "invalid app capability name 'Bad Name'" in message
    assert mailer.calls == []


def test_a_granted_capability_the_application_does_not_provide(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    plugin(make_plugin, "lonely", CALLER, capabilities=("app:calendar.read",))
    with make_host(plugins_dir, state_dir, launcher) as host:
        enable(host, "lonely")
        assert host.call("lonely", "main.run", "calendar.read", {}) == [
            "NotGrantedError",
            "not granted",
            "not granted: plugin 'lonely' asked for app:calendar.read, which this application "
            "does not provide; check the capability name against the application's "
            "documentation",
        ]
