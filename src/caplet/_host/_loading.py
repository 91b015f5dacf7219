"""Which plugins may load at all in this process: locked mode, the allowlist, autoload, strictness.

Seed 001: plugins are off unless enabled, and off in CI contexts unless
explicitly pinned. So, read from the environment unless the caller decides:

* ``locked``: only plugins with a matching ``caplet.lock`` entry may load
  (``--locked``, ``CAPLET_LOCKED=1``; the default when ``CI`` is true, as CI
  services set it; ``CAPLET_LOCKED=0`` turns it off explicitly);
* ``allowlist``: ``CAPLET_LOAD_PLUGINS=a,b`` lets only those plugins be
  enabled (set and empty: none), like pytest's ``PYTEST_PLUGINS``;
* ``autoload``: ``CAPLET_DISABLE_PLUGIN_AUTOLOAD`` (any non-empty value, as
  pytest's ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) stops discovery of installed
  distributions, except those the allowlist names;
* ``strict``: discovery raises :class:`~caplet._errors.LockedModeError`
  listing every plugin that cannot load, instead of warning and going on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "AUTOLOAD_ENV",
    "CI_ENV",
    "LOAD_PLUGINS_ENV",
    "LOCKED_ENV",
    "LoadingRules",
    "env_flag",
]

LOCKED_ENV = "CAPLET_LOCKED"
CI_ENV = "CI"
LOAD_PLUGINS_ENV = "CAPLET_LOAD_PLUGINS"
AUTOLOAD_ENV = "CAPLET_DISABLE_PLUGIN_AUTOLOAD"

_TRUE = frozenset({"1", "true", "yes", "on"})


def env_flag(value: str | None) -> bool:
    """``1``, ``true``, ``yes``, ``on`` (any case) are true; anything else, or unset, false."""
    return value is not None and value.strip().lower() in _TRUE


@dataclass(frozen=True, slots=True)
class LoadingRules:
    """What may load; see the module docstring. ``allowlist`` None means no allowlist."""

    locked: bool = False
    allowlist: frozenset[str] | None = None
    autoload: bool = True
    strict: bool = False

    @classmethod
    def from_environment(
        cls,
        env: Mapping[str, str],
        *,
        locked: bool | None = None,
        strict: bool = False,
    ) -> LoadingRules:
        """The rules *env* sets, with *locked* (when not None) overriding it."""
        if locked is None:
            explicit = env.get(LOCKED_ENV, "").strip()
            locked = env_flag(explicit) if explicit else env_flag(env.get(CI_ENV))
        allowlist: frozenset[str] | None = None
        if LOAD_PLUGINS_ENV in env:
            allowlist = frozenset(
                name.strip() for name in env[LOAD_PLUGINS_ENV].split(",") if name.strip()
            )
        return cls(
            locked=locked,
            allowlist=allowlist,
            autoload=not env.get(AUTOLOAD_ENV, "").strip(),
            strict=strict,
        )

    def allows(self, name: str) -> bool:
        """True when the allowlist (if any) names *name*."""
        return self.allowlist is None or name in self.allowlist

    def discovers_installed(self, name: str) -> bool:
        """Whether the installed plugin *name* is discovered at all."""
        if self.autoload:
            return True
        return self.allowlist is not None and name in self.allowlist
