"""The host's ctx dispatcher without workers: cycles, plugin log lines, failures of the host."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from caplet import (
    CallCycleError,
    ContextError,
    ContextLimits,
    Policy,
    SqliteStore,
    StoreError,
    TrustTier,
)
from caplet._host._apps import AppRegistry
from caplet._host._context import ContextBroker, PluginRequests
from caplet._host._plugin_log import PluginLog
from caplet._host._records import PluginState
from caplet._sandbox._protocol import ContextOp, ContextRequest


class FakeManager:
    """Just what ContextBroker uses of a PluginManager."""

    def __init__(self, store: Any, modules: dict[str, str]) -> None:
        self.policy = Policy()
        self.store = store
        self.modules = modules  # plugin -> the module it provides
        self.logged: list[tuple[str, str, str, bool]] = []

    def get_plugin(self, name: str) -> Any:
        module = self.modules.get(name)
        if module is None:
            return None
        manifest = SimpleNamespace(modules=[SimpleNamespace(name=module)])
        return SimpleNamespace(state=PluginState.ENABLED, manifest=manifest)

    def log_decision(
        self, plugin: str, action: str, target: str, allowed: bool, detail: str = ""
    ) -> None:
        self.logged.append((plugin, action, target, allowed))


def _call(target: str) -> ContextRequest:
    return ContextRequest(1, 1, ContextOp.PLUGINS_CALL, {"target": target, "args": []})


def test_a_cycle_through_nested_calls_is_refused(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "state") as store:
        manager = FakeManager(store, {"a": "amod", "b": "bmod"})
        handlers: dict[str, PluginRequests] = {}

        def call_plugin(
            provider: str, target: str, args: tuple[object, ...], timeout_s: float
        ) -> Any:
            # What the provider's worker would do: call back into the first plugin.
            return handlers[provider](_call("amod.run"), time.monotonic() + 5)

        broker = ContextBroker(manager, AppRegistry(), call_plugin)  # type: ignore[arg-type]
        handlers["a"] = PluginRequests(
            broker, "a", http=(), apps=frozenset(), modules=frozenset({"bmod"}), requires=("b",)
        )
        handlers["b"] = PluginRequests(
            broker, "b", http=(), apps=frozenset(), modules=frozenset({"amod"}), requires=("a",)
        )
        with pytest.raises(CallCycleError) as info:
            handlers["a"](_call("bmod.run"), time.monotonic() + 5)
        assert str(info.value).startswith(
            "call cycle: plugin 'b' calling amod.run of plugin 'a' would re-enter a call in "
            "flight (a -> b -> a)"
        )
        assert broker.chain() == [], "the chain is unwound"
        assert ("b", "host.call", "a:amod.run", False) in manager.logged


class BrokenStore:
    def kv_keys(self, plugin: str, prefix: str = "", *, location: str = "") -> list[str]:
        raise StoreError("state database /secret/path/caplet.db stayed locked")


def test_a_failing_store_reaches_the_plugin_without_host_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = FakeManager(BrokenStore(), {})
    broker = ContextBroker(manager, AppRegistry(), lambda *a: None)  # type: ignore[arg-type]
    handler = broker.handler(
        SimpleNamespace(  # type: ignore[arg-type]
            name="p",
            location="/plugins/p",
            capabilities=(),
            tier=TrustTier.COMMUNITY,
            manifest=SimpleNamespace(requires=(), limits=SimpleNamespace(max_output_kb=None)),
        )
    )
    with pytest.raises(ContextError) as info:
        handler(ContextRequest(1, 1, ContextOp.KV_KEYS, {"prefix": ""}), time.monotonic() + 5)
    assert info.value.category == "host error"
    assert "/secret/path" not in str(info.value)
    assert str(info.value) == (
        "plugin 'p': ctx.kv.keys failed in the host (its state store is unavailable); try "
        "again later"
    )
    assert any("/secret/path" in r.getMessage() for r in caplog.records), "the host logs it"


def test_plugin_log_escapes_everything_unprintable(caplog: pytest.LogCaptureFixture) -> None:
    log = PluginLog(ContextLimits(), lambda: 0.0)
    caplog.set_level(logging.INFO, logger="caplet.plugins")
    assert log.write("p", "info", "ok\r\n[host] forged\x1b[31m\u202eevil\u200b tab\tend")
    assert [r.getMessage() for r in caplog.records] == [
        "[p] ok\\r\\n[host] forged\\x1b[31m\\u202eevil\\u200b tab\\tend"
    ]
