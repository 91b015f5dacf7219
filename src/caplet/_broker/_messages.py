"""One shape for every broker error message.

``"<category>: plugin 'p', GET https://host/path: <reason>; <fix>"``: the
category first (stable, what the decision log records), then who asked for
what, why it failed and what to do. The URL shown is redacted (no query) and
no message ever contains a resolved address.
"""

from __future__ import annotations

from typing import TypeVar

from caplet._errors import BrokerError

__all__ = ["broker_error"]

_E = TypeVar("_E", bound=BrokerError)


def broker_error(
    cls: type[_E],
    /,
    *,
    plugin: str,
    method: str,
    url: str,
    reason: str,
    fix: str = "",
    category: str | None = None,
) -> _E:
    """Build (not raise) a ``cls`` with the standard message."""
    label = category if category is not None else cls.category
    target = " ".join(part for part in (method, url) if part)
    where = f"plugin {plugin!r}, {target}" if target else f"plugin {plugin!r}"
    message = f"{label}: {where}: {reason}"
    if fix:
        message += f"; {fix}"
    return cls(message, plugin=plugin, url=url, category=category)
