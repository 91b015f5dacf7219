"""The host's checks on a guest's requests, with a fake call path (real ones: test_guest.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from caplet._errors import (
    CallTimeoutError,
    ContextArgumentError,
    HostCallError,
    NotGrantedError,
    PluginCallError,
    WorkerCrashedError,
)
from caplet._host._guest_catalog import GuestCatalog
from caplet._host._guest_requests import GUEST_LOG_NAME, GuestRequests
from caplet._host._validate import FunctionValidator
from caplet._sandbox._guest_wire import HostFunction, HostModule
from caplet._sandbox._protocol import ContextOp, ContextRequest

CATALOG = GuestCatalog(
    (HostModule("fsread", "fs-read", "Files.", (HostFunction("read_file"),)),),
    {"fswrite": "plugin 'fs-write' declares it but is not enabled"},
)


class Host:
    """The callbacks GuestRequests needs, recording what they are asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[object, ...], dict[str, object], float]] = []
        self.log: list[tuple[str, str, str, bool, str]] = []
        self.raises: Exception | None = None
        self.validators: dict[str, FunctionValidator] = {}

    def call(
        self,
        provider: str,
        target: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        timeout_s: float,
    ) -> object:
        self.calls.append((provider, target, args, kwargs, timeout_s))
        if self.raises is not None:
            raise self.raises
        return {"read": args}

    def handler(self) -> GuestRequests:
        def validators(plugin: str) -> Mapping[str, FunctionValidator]:
            assert plugin == "fs-read"
            return self.validators

        return GuestRequests(
            lambda: CATALOG,
            self.call,
            validators,
            lambda *entry: self.log.append(entry),
        )


def _request(**args: Any) -> ContextRequest:
    body = {"module": "fsread", "function": "read_file", "args": ["a.md"], "kwargs": {}}
    body.update(args)
    return ContextRequest(1, 1, ContextOp.GUEST_CALL, body)


@pytest.fixture
def host() -> Host:
    return Host()


def _deadline() -> float:
    return time.monotonic() + 60


def test_a_declared_function_of_an_enabled_plugin_is_called(host: Host) -> None:
    assert host.handler()(_request(), _deadline()) == {"read": ("a.md",)}
    (provider, target, args, kwargs, timeout_s) = host.calls[0]
    assert (provider, target, args, kwargs) == ("fs-read", "fsread.read_file", ("a.md",), {})
    assert 0 < timeout_s < 60
    assert host.log == [("fs-read", "guest.call", "fsread.read_file", True, "called by guest code")]


def test_every_op_but_guest_call_is_refused(host: Host) -> None:
    handler = host.handler()
    for op in ContextOp:
        if op is ContextOp.GUEST_CALL:
            continue
        with pytest.raises(NotGrantedError, match=f"guest code has no ctx.{op.value}"):
            handler(ContextRequest(1, 1, op, {}), _deadline())
    assert host.calls == []
    assert {entry[0] for entry in host.log} == {GUEST_LOG_NAME}


def test_a_module_that_is_not_enabled_is_refused_with_why(host: Host) -> None:
    with pytest.raises(NotGrantedError) as info:
        host.handler()(_request(module="fswrite"), _deadline())
    assert str(info.value) == (
        "not granted: host.fswrite.read_file: plugin 'fs-write' declares it but is not "
        "enabled; importable host modules: fsread"
    )
    with pytest.raises(NotGrantedError, match=r"'fsreed' \(did you mean 'fsread'\?\)"):
        host.handler()(_request(module="fsreed"), _deadline())
    assert host.calls == []


def test_an_undeclared_function_is_refused_naming_the_declared_ones(host: Host) -> None:
    with pytest.raises(NotGrantedError) as info:
        host.handler()(_request(function="read_fil"), _deadline())
    assert str(info.value) == (
        "not granted: module 'host.fsread' has no function 'read_fil' (did you mean "
        "'read_file'?); plugin 'fs-read' declares: read_file"
    )
    assert host.log[-1][:4] == ("fs-read", "guest.call", "fsread.read_fil", False)


@pytest.mark.parametrize(
    "body",
    [
        {"module": 1},
        {"args": "a.md"},
        {"kwargs": []},
        {"extra": True},
    ],
)
def test_malformed_arguments_are_refused(host: Host, body: dict[str, object]) -> None:
    with pytest.raises(ContextArgumentError, match=r"guest\.call takes module"):
        host.handler()(_request(**body), _deadline())


def test_the_declared_args_schema_is_checked_without_the_manifest_path(
    host: Host, tmp_path: Path
) -> None:
    from caplet._host._validate import compile_schema

    schema = {"type": "array", "prefixItems": [{"type": "string"}]}
    host.validators["fsread.read_file"] = FunctionValidator(
        plugin="fs-read",
        target="fsread.read_file",
        field="modules.fsread.functions.read_file",
        manifest_path=tmp_path / "plugin.toml",
        args=compile_schema(schema, AssertionError),
    )
    with pytest.raises(ContextArgumentError) as info:
        host.handler()(_request(args=[5]), _deadline())
    assert str(info.value) == (
        "invalid arguments: the arguments of host.fsread.read_file do not match its schema: "
        "at $[0]: 5 is not of type 'string'"
    )
    assert str(tmp_path) not in str(info.value)
    with pytest.raises(ContextArgumentError, match="pass name positionally"):
        host.handler()(_request(args=[], kwargs={"name": "a"}), _deadline())
    assert host.calls == []


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (
            PluginCallError("plugin 'fs-read': fsread.read_file raised OSError: no"),
            "raised OSError",
        ),
        (CallTimeoutError("plugin 'fs-read': fsread.read_file timed out"), "timed out"),
        (
            WorkerCrashedError("plugin 'fs-read': died; its stderr ends with:\n/secret/path"),
            "died",
        ),
    ],
)
def test_a_failing_plugin_is_a_host_call_error(
    host: Host, failure: Exception, expected: str
) -> None:
    host.raises = failure
    with pytest.raises(HostCallError) as info:
        host.handler()(_request(), _deadline())
    message = str(info.value)
    assert message.startswith("host.call failed: host.fsread.read_file (plugin 'fs-read'): ")
    assert expected in message
    assert "/secret/path" not in message  # a dead worker's stderr is the host's private log
    assert host.log[-1][3] is False


def test_no_call_starts_once_the_snippets_deadline_has_passed(host: Host) -> None:
    with pytest.raises(HostCallError, match="no time is left of the snippet's deadline"):
        host.handler()(_request(), time.monotonic())
    assert host.calls == []


def test_a_failing_permission_log_is_a_host_error_without_details(host: Host) -> None:
    from caplet._errors import ContextError, StoreError

    def broken(*entry: object) -> None:
        raise StoreError("database is locked at /secret/state/caplet.db")

    handler = GuestRequests(lambda: CATALOG, host.call, lambda plugin: {}, broken)
    with pytest.raises(ContextError) as info:
        handler(_request(), _deadline())
    assert info.value.category == "host error"
    assert str(info.value).startswith("host error: the host could not record the call")
    assert "/secret" not in str(info.value)
