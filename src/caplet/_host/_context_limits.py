"""The administrator's limits on what a plugin's ``ctx`` may ask of the host.

``Policy.context`` holds one :class:`ContextLimits`; the network limits of
``ctx.http`` are ``Policy.network`` (docs/network.md). Every limit here
exists because the host does the work on the plugin's behalf: without one a
plugin could fill the state database (kv), flood the host's log, or keep the
host busy answering requests for as long as its deadline lasts.
"""

from __future__ import annotations

from pydantic.dataclasses import dataclass

from caplet._errors import PolicyError
from caplet._validated import MODEL_CONFIG, Bytes, Count, Positive, validated

__all__ = ["ContextLimits"]


@validated(PolicyError, "context limits")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class ContextLimits:
    """Limits on ``ctx`` requests, per plugin.

    ``max_requests_per_call``: ``ctx`` requests one call may make; the rest
    are refused (ContextLimitError), the call goes on.

    ``kv_*``: a key is at most ``kv_max_key_chars`` characters; a value at
    most ``kv_max_value_bytes`` once encoded (msgpack); a plugin holds at
    most ``kv_max_keys`` keys and ``kv_max_bytes`` bytes (UTF-8 keys plus
    encoded values) in all.

    ``log_*``: a line is cut to ``log_max_chars`` characters; a plugin may
    log ``log_lines_per_minute`` lines per sliding minute, and the lines
    over it are dropped and counted (the next line that passes says how
    many were dropped).

    ``app_max_result_bytes``: the largest result (encoded) an application
    capability handler may return to a plugin.
    """

    max_requests_per_call: Count = 10_000
    kv_max_key_chars: Positive = 256
    kv_max_value_bytes: Bytes = 64 * 1024
    kv_max_keys: Count = 1000
    kv_max_bytes: Bytes = 1024 * 1024
    log_max_chars: Positive = 2000
    log_lines_per_minute: Count = 120
    app_max_result_bytes: Bytes = 1024 * 1024
