"""The public API is exactly caplet.__all__: sorted, complete, importable, lazy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import caplet


def test_all_is_sorted_and_unique() -> None:
    assert caplet.__all__ == sorted(set(caplet.__all__))


def test_all_matches_the_export_table_and_resolves() -> None:
    assert set(caplet.__all__) == set(caplet._EXPORTS)
    for name in caplet.__all__:
        assert getattr(caplet, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'Nope'"):
        getattr(caplet, "Nope")  # noqa: B009


def test_every_error_is_a_caplet_error() -> None:
    for name in caplet.__all__:
        value = getattr(caplet, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, caplet.CapletError), name


def test_worker_import_stays_light() -> None:
    """A worker must not pay for the host's dependencies before running a plugin."""
    code = (
        "import sys, caplet._sandbox._worker;"
        "heavy = ('pydantic', 'rich', 'typer', 'sqlite3', 'caplet._host._host');"
        "heavy = [m for m in heavy if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


# -- caplet.audit: the auditor's public module (issue 5) ----------------------------------------


def test_audit_module_all_is_sorted_complete_and_resolves() -> None:
    import caplet.audit

    module = caplet.audit
    assert module.__all__ == sorted(set(module.__all__))
    assert set(module.__all__) == set(module._EXPORTS)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is getattr(caplet, name), name
    for name in (
        "inject_canaries",
        "verify_canaries",
        "parse_audit_response",
        "deep_audit",
        "format_audit_result",
    ):
        assert name in module.__all__
        assert callable(getattr(module, name))


def test_audit_module_is_reachable_from_the_package() -> None:
    code = (
        "import caplet, sys;"
        "assert 'caplet.audit' not in sys.modules;"
        "f = caplet.audit.inject_canaries;"
        "print(f.__module__, 'httpx' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["caplet._audit._canary", "False"]


def test_audit_module_unknown_attribute() -> None:
    import caplet.audit

    with pytest.raises(AttributeError, match=r"module 'caplet\.audit' has no attribute 'nope'"):
        getattr(caplet.audit, "nope")  # noqa: B009


# -- caplet.plugin: the API inside the sandbox (issue 6) ------------------------------------------


def test_plugin_module_all_is_sorted_and_resolves() -> None:
    import caplet.plugin

    module = caplet.plugin
    assert module.__all__ == sorted(set(module.__all__))
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert callable(module.context)
    assert caplet.plugin is caplet.__getattr__("plugin")
    for name in ("ContextError", "NotGrantedError", "BrokerError", "BlockedByPolicyError"):
        assert getattr(module, name) is getattr(caplet, name)


def test_plugin_module_import_stays_light() -> None:
    """Importable in a worker: no host dependency is loaded by it."""
    code = (
        "import sys, caplet.plugin;"
        "heavy = ('pydantic', 'rich', 'typer', 'sqlite3', 'httpx', 'jsonschema', 'caplet._host',"
        " 'caplet._broker');"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
