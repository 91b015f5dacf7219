"""caplet: capability-scoped plugins for Python.

The public API is exactly ``__all__``. Names are imported lazily (PEP 562) so
that ``import caplet`` stays cheap for the CLI and, above all, so that a
worker process importing :mod:`caplet._sandbox._worker` does not pay for the
host's dependencies (pydantic, rich, sqlite) before it runs a plugin.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from caplet._errors import CapletError as CapletError

_EXPORTS: dict[str, str] = {
    "CapletError": "caplet._errors",
}

__all__ = ["CapletError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'caplet' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
