"""Imports flow one way through the layers (docs/architecture.md), with no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import caplet

PACKAGE = Path(caplet.__file__).parent

#: Lowest first. A module may import from its own layer or lower ones only.
LAYERS = [
    {
        "_atomic",
        "_body",
        "_display",
        "_error_base",
        "_errors",
        "_errors_request",
        "_findings",
        "_logs",
        "_lookalikes",
        "_marks",
        "_numbers",
        "_reading",
        "_suggest",
        "_syscall",
        "_toml",
        "_tree_format",
        "_validated",
        "_version",
        "_watchdog",
    },
    {"_config"},
    {"_capabilities"},
    {"_manifest"},
    {"_scan", "_scan_cluster"},
    {"_audit"},
    {"_trust"},
    {"_sandbox"},
    {"_broker"},
    {"_host"},
    {"_selftest"},
    {"_mcp"},
    {"_cli"},
]


def _layer(module: str) -> int:
    top = module.split(".")[1] if module.count(".") >= 1 else ""
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index
    raise AssertionError(f"module {module} is in no layer; add it to LAYERS and the docs")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.startswith("caplet")]


def test_imports_flow_one_way() -> None:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module in ("caplet", "caplet.__main__", "caplet.audit", "caplet.plugin"):
            # Public facades over the layers (caplet.audit re-exports the
            # audit layer, caplet.plugin the worker-side context), like the
            # package itself.
            continue
        if "_examples" in module:
            continue
        own = _layer(module)
        for imported in _imports(path):
            if imported == "caplet":
                violations.append(f"{module} imports the top-level package")
            elif _layer(imported) > own:
                violations.append(
                    f"{module} (layer {own}) imports {imported} (layer {_layer(imported)})"
                )
    assert violations == []


def test_no_relative_imports() -> None:
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: use absolute imports"


def test_plugin_api_imports_only_what_a_worker_may() -> None:
    """caplet.plugin runs inside the sandbox: base and sandbox modules only."""
    allowed = LAYERS[0] | {"_sandbox"}
    imported = _imports(PACKAGE / "plugin.py")
    assert imported, "caplet.plugin re-exports the context"
    assert [m for m in imported if m.split(".")[1] not in allowed] == []
