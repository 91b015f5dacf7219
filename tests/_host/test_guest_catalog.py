"""The guest catalog: which host modules guest code may import, and what a gate hides."""

from __future__ import annotations

from caplet._host._guest_catalog import GuestCatalog
from caplet._sandbox._guest_wire import HostFunction, HostModule


def catalog() -> GuestCatalog:
    return GuestCatalog(
        (
            HostModule(
                "notes", "notes", "Notes.", (HostFunction("echo", ""), HostFunction("secret", ""))
            ),
            HostModule("vault", "vault", "Keys.", (HostFunction("open_vault", ""),)),
        ),
        {"idle": "plugin 'drafts' declares it but is not enabled (state: discovered)"},
    )


def test_a_gate_hides_functions_and_whole_modules_with_their_names() -> None:
    hidden = {("notes", "notes.secret"), ("vault", "vault.open_vault")}

    def gate(plugin: str, target: str) -> str | None:
        return "not offered" if (plugin, target) in hidden else None

    offered = catalog().offered(gate)
    assert offered.names == ("notes",)
    notes = offered.module("notes")
    assert notes is not None
    assert [f.name for f in notes.functions] == ["echo"]
    assert offered.module("vault") is None
    # The reasons of unavailable modules name plugins the gate may hide: gone too.
    assert offered.missing("vault") == (
        "no plugin declares a module 'vault'; importable host modules: notes"
    )
    assert "drafts" not in offered.missing("idle")


def test_a_gate_that_hides_nothing_keeps_every_function() -> None:
    full = catalog()
    offered = full.offered(lambda plugin, target: None)
    assert offered.modules == full.modules
