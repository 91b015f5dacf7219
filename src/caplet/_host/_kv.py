"""``ctx.kv`` in the host: a small key-value store per plugin, in the state database.

Seed 002's capability-gated context gives a plugin storage of its own
without any file system capability. The entries live in the store's ``kv``
table (:meth:`caplet._trust._store.TrustStore.kv_put` and friends), keyed by
the plugin's identity, its name *and* its location (where it is, as its
approval records it), which the host takes from the worker that sent the
request, never from the request itself: one plugin cannot name another's
keys, and another project's plugin of the same name is another plugin
(decide14). Values are encoded with msgpack (what crossed the channel, so it
round-trips exactly, bytes included), and both each value and each plugin's
total are bounded (:class:`~caplet._host._context_limits.ContextLimits`):
the state database is the host's, and a plugin must not be able to fill it.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgpack

from caplet._errors import ContextArgumentError, ContextError, ContextLimitError
from caplet._host._context_limits import ContextLimits
from caplet._trust._store import TrustStore

__all__ = ["KvService"]


class KvService:
    """The four ``ctx.kv`` operations, with their limits, for every plugin of a host."""

    def __init__(self, store: TrustStore, limits: ContextLimits) -> None:
        self._store = store
        self._limits = limits

    def _key(self, plugin: str, key: object, what: str = "key") -> str:
        limit = self._limits.kv_max_key_chars
        if not isinstance(key, str):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': a ctx.kv {what} must be a str, got "
                f"{type(key).__name__}",
                plugin=plugin,
            )
        if (what == "key" and not key) or len(key) > limit or "\0" in key:
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.kv {what} {key[:40]!r} must be "
                f"{'non-empty, ' if what == 'key' else ''}at most {limit} characters and "
                "free of NUL; use a shorter key",
                plugin=plugin,
            )
        return key

    def get(self, plugin: str, key: object, *, location: str) -> Mapping[str, object]:
        """``{"found": bool, "value": value}`` (a stored None is found)."""
        name = self._key(plugin, key)
        blob = self._store.kv_get(plugin, name, location=location)
        if blob is None:
            return {"found": False, "value": None}
        try:
            value = msgpack.unpackb(blob, raw=False, strict_map_key=True, max_ext_len=0)
        except Exception as exc:  # msgpack raises several types for a damaged blob
            raise ContextError(
                f"plugin '{plugin}': the ctx.kv value under {name!r} cannot be read (the state "
                "database was changed outside caplet); set it again",
                plugin=plugin,
            ) from exc
        return {"found": True, "value": value}

    def set(self, plugin: str, key: object, value: object, *, location: str) -> None:
        """Store ``value`` (already checked to cross the channel) under ``key``."""
        name = self._key(plugin, key)
        blob: bytes = msgpack.packb(value)
        limits = self._limits
        if len(blob) > limits.kv_max_value_bytes:
            raise ContextLimitError(
                f"limit exceeded: plugin '{plugin}': ctx.kv.set({name!r}): the value encodes "
                f"to {len(blob)} bytes, over the limit of {limits.kv_max_value_bytes} bytes "
                "per value; store less under one key",
                plugin=plugin,
            )
        write = self._store.kv_put(
            plugin,
            name,
            blob,
            max_keys=limits.kv_max_keys,
            max_bytes=limits.kv_max_bytes,
            location=location,
        )
        if not write.stored:
            raise ContextLimitError(
                f"limit exceeded: plugin '{plugin}': ctx.kv.set({name!r}) would make "
                f"{write.keys} keys and {write.total_bytes} bytes, over the plugin's limit of "
                f"{limits.kv_max_keys} keys and {limits.kv_max_bytes} bytes; delete keys it "
                "no longer needs (ctx.kv.delete)",
                plugin=plugin,
            )

    def delete(self, plugin: str, key: object, *, location: str) -> bool:
        """Remove ``key``; False when it was not there."""
        return self._store.kv_delete(plugin, self._key(plugin, key), location=location)

    def keys(self, plugin: str, prefix: object, *, location: str) -> list[str]:
        """The plugin's keys starting with ``prefix``, sorted."""
        found = self._store.kv_keys(plugin, self._key(plugin, prefix, "prefix"), location=location)
        return list(found)
