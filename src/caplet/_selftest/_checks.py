"""Checks of what an attack produced: the evidence that names the layer that stopped it.

Each check raises :class:`~caplet._errors.SelftestMismatchError` through
:func:`~._model.expect` when the expected layer's evidence is missing, and
:class:`~caplet._errors.SelftestBreachError` through
:func:`~._model.breach_unless` when the attack visibly succeeded. The
errno is the evidence (docs/security.md, "Reading the table"):

- ``namespaces``: the object does not exist in the jail (ENOENT, ESRCH for a
  pid, ECONNREFUSED for an abstract socket of the host's network namespace)
  or its mount is read-only or small (EROFS, ENOSPC);
- ``landlock``: a path the mounts expose but the ruleset does not grant for
  that access (EACCES at open, landlock(7));
- ``seccomp``: the system call itself fails with EPERM before any lookup;
- ``rlimits``: EMFILE, EFBIG, ``MemoryError`` (setrlimit(2));
- ``cgroup``: the worker's pids cgroup refuses a fork with EAGAIN and its
  ``pids.events`` counts the refusal (cgroups(7)).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from caplet._errors import (
    CallTimeoutError,
    CapletError,
    LifecycleError,
    PluginCallError,
    PluginNotFoundError,
)
from caplet._host._host import PluginHost
from caplet._selftest._model import Arena, Attempt, Check, breach_unless, expect

__all__ = [
    "DEADLINE_MS",
    "PROCESS_LIMIT",
    "AlsoTrue",
    "enable_refused",
    "escaped",
    "no_escape",
    "pids_events",
    "raised",
    "refused",
    "timed_out",
]

#: Short enough that the deadline cases stay cheap, long enough for a start.
DEADLINE_MS = 500
#: The policy's default RLIMIT_NPROC (``Policy.processes``).
PROCESS_LIMIT = 64

AlsoTrue = Callable[[Attempt, Arena], bool]


def escaped(attempt: Attempt) -> bool:
    """The attack's own report says it succeeded (the prelude's ``{"escaped": ...}``)."""
    value = attempt.value
    return isinstance(value, dict) and "escaped" in value


def no_escape(attempt: Attempt) -> None:
    breach_unless(not escaped(attempt), f"the attack succeeded: {attempt.describe()}")


def refused(errno_name: str, *also: AlsoTrue) -> Check:
    """The attack ran and the kernel refused it with ``errno_name``; ``also`` must hold.

    ``errno_name`` may list alternatives the same layer produces
    (``"EACCES|EROFS"``: a search-only directory of the jail, or its
    read-only root, depending on where the arena lies).
    """
    names = errno_name.split("|")

    def check(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
        expect(attempt.enabled, attempt.describe())
        no_escape(attempt)
        for condition in also:
            breach_unless(condition(attempt, arena), f"{condition.__name__} failed")
        expect(attempt.error is None, attempt.describe())
        expect(attempt.value in [{"errno": name} for name in names], f"expected {errno_name}")

    return check


def raised(
    error: type[CapletError], *, exc_type: str | None = None, says: str = "", worker_lives: bool
) -> Check:
    """``main.run`` raised ``error`` (with the plugin's ``exc_type``) mentioning ``says``.

    ``worker_lives``: whether the follow-up ping must reach the same worker
    (an exception reply) or a fresh one (a killed jail, respawned lazily).
    """

    def check(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
        expect(attempt.enabled, attempt.describe())
        no_escape(attempt)
        expect(isinstance(attempt.error, error), f"expected {error.__name__}")
        if exc_type is not None:
            expect(
                isinstance(attempt.error, PluginCallError) and attempt.error.exc_type == exc_type,
                f"expected the plugin to get {exc_type}",
            )
        expect(says in str(attempt.error), f"expected the error to say {says!r}")
        breach_unless(attempt.followup == 1, f"the host could not call the plugin again: {attempt}")
        expect(
            attempt.same_worker is worker_lives,
            "the worker should have " + ("survived" if worker_lives else "been killed"),
        )

    return check


def timed_out(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
    raised(CallTimeoutError, says=f"timed out after {DEADLINE_MS} ms", worker_lives=False)(
        attempt, arena, host
    )


def enable_refused(*says: str) -> Check:
    """Enable (or load) was refused, naming each of ``says``; no worker ever ran."""

    def check(attempt: Attempt, _arena: Arena, host: PluginHost) -> None:
        breach_unless(not attempt.enabled, f"the plugin was loaded: {attempt.describe()}")
        for text in says:
            expect(text in attempt.reason, f"expected the refusal to name {text!r}")
        breach_unless(host.worker_pid(attempt.plugin) is None, "a worker runs")
        try:
            host.call(attempt.plugin, "main.run")
        except (LifecycleError, PluginNotFoundError):
            pass
        except CapletError as exc:
            expect(False, f"calling a refused plugin raised {type(exc).__name__}: {exc}")
        else:
            breach_unless(False, "a refused plugin could still be called")

    return check


def pids_events(pid: int) -> dict[str, int]:
    """The ``pids.events`` counters of the pids cgroup ``pid`` is in (cgroups(7))."""
    lines = Path(f"/proc/{pid}/cgroup").read_text(encoding="ascii").splitlines()
    where = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1 with the pids controller
            where = Path("/sys/fs/cgroup/pids", path.lstrip("/"))
        elif controllers == "" and where is None:  # the cgroup v2 line
            where = Path("/sys/fs/cgroup", path.lstrip("/"))
    if where is None:
        return {}
    try:
        text = (where / "pids.events").read_text(encoding="ascii")
    except OSError:
        return {}
    return {key: int(value) for key, value in (line.split() for line in text.splitlines())}
