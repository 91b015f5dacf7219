"""Resource attacks on ctx's own stores: ``ctx.kv`` and ``ctx.log`` (split out of
:mod:`._resources` when it passed 600 lines).
"""

from __future__ import annotations

from caplet._host._host import PluginHost
from caplet._selftest._checks import escaped
from caplet._selftest._model import (
    Arena,
    Attempt,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)

__all__ = ["CASES", "LOG_LINES"]

#: Lines the log-flood case sends; ContextLimits lets 120 a minute through.
LOG_LINES = 1000
_LOG_PER_MINUTE = 120

KV_BOMB = """
def run(ctx):
    # Half a megabyte of zeros: nothing on the wire would be smaller compressed.
    try:
        ctx.kv.set("bomb", b"\\0" * (512 * 1024))
    except Exception as exc:
        return {"refused": type(exc).__name__, "message": str(exc)}
    return {"escaped": "stored 512 KiB"}
"""

KV_FILL = """
def run(ctx):
    value = b"\\0" * (60 * 1024)
    stored = 0
    try:
        while stored < 64:
            ctx.kv.set(f"fill-{stored}", value)
            stored += 1
    except Exception as exc:
        return {"refused": type(exc).__name__, "message": str(exc), "stored": stored}
    return {"escaped": f"stored {stored} values of 60 KiB"}
"""

LOG_FLOOD = """
def run(ctx, lines):
    for index in range(lines):
        ctx.log.warning(f"flood {index}")
    return {"sent": lines}
"""


def kv_refused(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    breach_unless(not escaped(attempt), attempt.describe())
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    value = attempt.value
    expect(
        isinstance(value, dict) and value.get("refused") == "ContextLimitError",
        "expected ContextLimitError",
    )
    assert isinstance(value, dict)
    expect(str(value.get("message", "")).startswith("limit exceeded"), attempt.describe())


def log_rate_limited(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    expect(attempt.value == {"sent": LOG_LINES}, attempt.describe())
    counted = arena.plugin_log_lines(attempt.plugin)
    breach_unless(
        counted <= _LOG_PER_MINUTE, f"{counted} of {LOG_LINES} flooded lines reached the log"
    )
    expect(counted > 0, "no line reached the log at all")


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "kv-bomb",
        Family.RESOURCES,
        "store 512 KiB of zeros in ctx.kv (a compression-bomb-shaped value)",
        Layer.CONTEXT,
        KV_BOMB,
        kv_refused,
    ),
    HostileCase(
        "kv-fill",
        Family.RESOURCES,
        "fill ctx.kv with 60 KiB values until the host's disk is full",
        Layer.CONTEXT,
        KV_FILL,
        kv_refused,
    ),
    HostileCase(
        "log-flood",
        Family.RESOURCES,
        f"send {LOG_LINES} ctx.log lines in one call",
        Layer.CONTEXT,
        LOG_FLOOD,
        log_rate_limited,
        args=fixed_args(LOG_LINES),
    ),
)
