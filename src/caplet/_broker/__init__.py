"""Private layer package; import from the concrete modules, see docs/architecture.md."""
