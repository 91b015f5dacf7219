"""The administrator's limits on guest code (``PluginHost.exec``, ``caplet exec``).

``Policy.guest`` holds one :class:`GuestLimits`. Guest code is untrusted by
definition (an LLM wrote it a moment ago), nobody reviewed it, and it has no
capability of its own, so its worker gets tighter resources than a plugin's
and a warm pool keeps its start off the agent's critical path.
"""

from __future__ import annotations

from pydantic import model_validator
from pydantic.dataclasses import dataclass

from caplet._errors import PolicyError
from caplet._validated import (
    MODEL_CONFIG,
    Cores,
    Count,
    Kilobytes,
    Megabytes,
    Milliseconds,
    Positive,
    validated,
)

__all__ = ["GuestLimits"]


@validated(PolicyError, "guest limits")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class GuestLimits:
    """Limits of one guest snippet and of the warm pool of guest workers.

    ``pool_size``: guest workers kept started and waiting (each runs one
    snippet, then it is discarded and a new one is started in the
    background); 0 starts every snippet's worker when it is needed.

    ``timeout_ms`` is a snippet's deadline when ``exec`` is given none, and
    ``max_timeout_ms`` the most it may ask for; the deadline covers the host
    functions the snippet calls (each is cut to what is left of it).

    ``memory_mb`` (address space), ``cpu_s``, ``processes``, ``open_files``
    and ``tmp_size_mb`` (its private ``/tmp``) are the worker's rlimits;
    ``cpu_cores`` the rate at which it may use CPU (as ``Policy.cpu_cores``).

    ``max_output_kb``: KiB of text kept per stream (stdout, stderr) and for
    the final value's repr; the encoded final value may be as large. The
    rest is dropped and ``GuestResult.truncated`` says so.
    ``max_code_kb``: the largest snippet accepted (UTF-8).
    ``max_host_calls``: host-module calls one snippet may make; the rest are
    refused (``ContextLimitError`` in the guest).
    """

    pool_size: Count = 2
    timeout_ms: Milliseconds = 5_000
    max_timeout_ms: Milliseconds = 60_000
    memory_mb: Megabytes = 256
    cpu_s: Positive = 30
    cpu_cores: Cores = 1.0
    processes: Positive = 8
    open_files: Positive = 64
    tmp_size_mb: Megabytes = 16
    max_output_kb: Kilobytes = 256
    max_code_kb: Kilobytes = 256
    max_host_calls: Count = 1_000

    @model_validator(mode="after")
    def _deadlines_agree(self) -> GuestLimits:
        if self.timeout_ms > self.max_timeout_ms:
            raise ValueError(
                f"timeout_ms ({self.timeout_ms}) is above max_timeout_ms ({self.max_timeout_ms}); "
                "lower timeout_ms or raise max_timeout_ms"
            )
        return self

    @property
    def max_output_chars(self) -> int:
        """Characters kept per output stream (and of the value's repr)."""
        return max(self.max_output_kb, 1) * 1024

    @property
    def max_frame_bytes(self) -> int:
        """The guest worker's channel limit: room for the reply and nothing more.

        Two streams and a repr of up to ``max_output_chars`` characters
        (4 bytes each at most in UTF-8), the value, and the traceback and
        framing; the host checks each field again when it decodes the reply.
        """
        return 13 * self.max_output_chars + 256 * 1024
