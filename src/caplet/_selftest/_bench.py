"""The bench: a throw-away arena, one host, and the proof that each attack was contained.

One :class:`Bench` serves a whole run: it builds the arena (a temporary
root with a state directory, a lock file, decoy files, a decoy "host"
process, listeners on 127.0.0.1, an abstract and a pathname unix socket,
two HTTP servers, the host's secret in its environment), writes every
case's plugin, and starts one :class:`~caplet._host._host.PluginHost` on
one sandbox launcher (one zygote) for all of them, so a run costs one
enable and one worker per case. The launcher is best-effort: the selftest
measures what the layers of *this* machine do, and reports a missing one
instead of refusing to start.

After every case, whatever its check said, :meth:`Bench.run` proves
containment: the plugin's jail (its whole pid namespace) is gone, the host
still serves an unrelated plugin, the plugin sources are unchanged but for
the case's own swaps, the state database passes ``PRAGMA integrity_check``,
no listener was reached, the decoy lives, and nothing was left in the
host's ``/tmp``.

The arena itself (what is built, the hosts and their policies) is
:mod:`._bench_arena`'s; this module runs the cases in it and proves
containment after each.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import assert_never

from caplet._errors import (
    CapletError,
    PluginNotFoundError,
    SelftestBreachError,
    SelftestError,
    SelftestMismatchError,
)
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules
from caplet._sandbox._sandboxed import FIXES
from caplet._selftest._bench_arena import _CANARY_PLUGIN, _HOST_TMP_DIRS, BenchArena
from caplet._selftest._fixtures import (
    fill_arena,
    fool_the_review,
    plugin_manifest,
    plugin_source,
)
from caplet._selftest._gullible import GullibleAuditor
from caplet._selftest._jails import (
    Jail,
    alive,
    digest_tree,
    fifo_idle,
    find_jail,
    idle,
    jail_gone,
)
from caplet._selftest._model import Attempt, HostileCase, Scenario, clip
from caplet._selftest._race import race
from caplet._selftest._report import CaseResult, CaseStatus, GatedResult, SelftestReport
from caplet._trust._lockfile import Lockfile, update_lockfile

__all__ = ["Bench", "run_selftest"]
#: Numbers in outcomes that change from run to run: pids, inodes, deleted files.
_VOLATILE = (
    (re.compile(r"\bpid \d+"), "pid N"),
    (re.compile(r"\[\d+\]"), "[N]"),
    (re.compile(r"#\d+"), "#N"),
)
#: Cases about the static gate itself: run and checked on the gated host.
_GATED_SCENARIOS = frozenset({Scenario.GATED, Scenario.RACE})


@dataclass
class Bench(BenchArena):
    """The arena, one host for every case, and the proof of containment after each.

    Use as a context manager. ``root`` is a fresh directory the bench owns
    (a temporary one when None); ``cases`` are the plugins to set up.
    """

    def __enter__(self) -> Bench:
        self._stack = ExitStack()
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    # -- one case ---------------------------------------------------------------------

    def run(self, case: HostileCase) -> CaseResult:
        """Run one attack, check it, prove containment; never raises for a case's failure."""
        layer = case.layer.isolation_layer
        missing = bool(layer is not None and self.layers.get(layer, "missing"))
        jails: list[Jail] = []
        try:
            attempt, jails = self._attack(case)
        except Exception as exc:  # the harness, not the attack: report it, run the rest
            self._cleanup(case, jails)
            return CaseResult.of(
                case,
                CaseStatus.ERROR,
                self._clean(f"{type(exc).__name__}: {exc}"),
                self._clean(traceback.format_exc(limit=-3)),
                layer_missing=missing,
            )
        status, detail = CaseStatus.CONTAINED, ""
        # A gated case is about the static gate itself: the ordinary host ran it.
        host = self.gated if case.scenario in _GATED_SCENARIOS else self.host
        try:
            case.check(attempt, self.arena, host)
        except SelftestBreachError as exc:
            status, detail = CaseStatus.OPEN, str(exc)
        except SelftestMismatchError as exc:
            status, detail = CaseStatus.ELSEWHERE, str(exc)
        except Exception as exc:  # a broken check is a harness error, said as such
            status, detail = CaseStatus.ERROR, f"the check failed: {type(exc).__name__}: {exc}"
        left = self._contain(case, jails, host)
        if left:
            status, detail = CaseStatus.OPEN, "; ".join(filter(None, [left, detail]))
        return CaseResult.of(
            case,
            status,
            self._clean(attempt.describe()),
            self._clean(detail),
            layer_missing=missing,
            with_every_layer=self._with_every_layer(case),
        )

    def _with_every_layer(self, case: HostileCase) -> GatedResult | None:
        """The same attack on the ordinary host, every layer on: the static gate first.

        Only ``CALL`` cases run twice; the others are about caplet's own
        layers (the gate, the lock file, the auditor, the hash pin) and do not
        depend on the switch.
        """
        if case.scenario is not Scenario.CALL:
            return None
        jails: list[Jail] = []
        try:
            attempt, jails = self._enable_and_call(case, self.gated)
        except Exception as exc:  # the harness, not the attack
            self._contain(case, jails, self.gated)
            return GatedResult(CaseStatus.ERROR, self._clean(f"{type(exc).__name__}: {exc}"))
        if not attempt.enabled:
            left = self._contain(case, jails, self.gated)
            if left:
                return GatedResult(CaseStatus.OPEN, self._clean(left))
            return GatedResult(CaseStatus.CONTAINED, self._clean(f"refused: {attempt.reason}"))
        status = CaseStatus.CONTAINED
        try:
            case.check(attempt, self.arena, self.gated)
        except SelftestBreachError:
            status = CaseStatus.OPEN
        except SelftestMismatchError:
            status = CaseStatus.ELSEWHERE
        except Exception:  # a broken check: the gate-off column reports it in full
            status = CaseStatus.ERROR
        left = self._contain(case, jails, self.gated)
        if left:
            status = CaseStatus.OPEN
        outcome = attempt.describe() if not left else f"{attempt.describe()} [{left}]"
        return GatedResult(status, self._clean(outcome))

    def _clean(self, text: str) -> str:
        """``text`` without what differs from run to run (paths, ports, pids, inodes)."""
        for raw, shown in self._scrub.items():
            text = text.replace(raw, shown)
        for pattern, shown in _VOLATILE:
            text = pattern.sub(shown, text)
        return clip(text, 300)

    def _attack(self, case: HostileCase) -> tuple[Attempt, list[Jail]]:
        match case.scenario:
            case Scenario.CALL:
                # The red team's host: the static gate is off, nothing is faked.
                return self._enable_and_call(case, self.host)
            case Scenario.GATED:
                return self._enable_and_call(case, self.gated)
            case Scenario.LOCKED:
                return self._locked(case), []
            case Scenario.RESTART:
                return self._restart(case)
            case Scenario.RACE:
                dirty = plugin_source(dict(case.swap)["plugin.py"])
                folder = self.arena.plugins_dir / case.name
                return race(self.gated, case, folder, dirty, self._enable), []
            case Scenario.AUDIT | Scenario.AUDIT_OPERATOR_MODEL:
                return self._audit(case), []
            case _:
                assert_never(case.scenario)

    def _enable(self, host: PluginHost, case: HostileCase) -> tuple[bool, str]:
        broken = {b.directory.name: b.error for b in host.manager.broken_plugins()}
        if case.name in broken:
            return False, str(broken[case.name])
        try:
            # The hostile plugins are not approved: the bench, run by the operator to
            # prove containment, consents for them (the layers under test come after).
            outcome = host.enable(
                case.name, config={"out": str(self.arena.out(case.name))}, consent=True
            )
        except CapletError as exc:
            return False, str(exc)
        return bool(outcome), outcome.reason

    def _enable_and_call(self, case: HostileCase, host: PluginHost) -> tuple[Attempt, list[Jail]]:
        plugin = case.name
        self._log_counter.counts.pop(plugin, None)  # each run's own ctx.log lines
        enabled, reason = self._enable(host, case)
        if not enabled:
            return Attempt(plugin, enabled=False, reason=reason), []
        monitor = host.worker_pid(plugin)
        if monitor is None:
            raise SelftestError(f"case {plugin!r}: enabled, but no worker runs")
        jails = [find_jail(monitor)]
        rejected = tuple(host.rejected_registrations(plugin))
        value: object = None
        error: CapletError | None = None
        try:
            value = host.call(plugin, "main.run", *case.args(self.arena, plugin))
        except CapletError as exc:
            error = exc
        followup = self._ping(host, plugin)
        now = host.worker_pid(plugin)
        if now is not None and now != monitor:
            jails.append(find_jail(now))
        attempt = Attempt(
            plugin,
            enabled=True,
            value=value,
            error=error,
            followup=followup,
            same_worker=now == monitor,
            rejected=rejected,
            jail_pid=jails[0].pid_one,
        )
        return attempt, jails

    @staticmethod
    def _ping(host: PluginHost, plugin: str) -> object:
        try:
            return host.call(plugin, "main.ping")
        except CapletError as exc:
            return f"{type(exc).__name__}: {exc}"

    def _swap(self, case: HostileCase) -> None:
        """Change the live tree as the case says, and expect that change from now on."""
        folder = self.arena.plugins_dir / case.name
        widened = [text[1:] for path, text in case.swap if path == "plugin.toml"]
        if widened:
            manifest = plugin_manifest(case, self.arena, extra=widened)
            (folder / "plugin.toml").write_text(manifest, encoding="utf-8")
        for relative, text in case.swap:
            if relative == "plugin.py":
                (folder / relative).write_text(plugin_source(text), encoding="utf-8")
            elif relative != "plugin.toml":
                (folder / relative).write_text(fill_arena(text, self.arena), encoding="utf-8")
        self._sources = digest_tree(self.arena.plugins_dir)

    def _locked(self, case: HostileCase) -> Attempt:
        plugin = case.name
        fool_the_review(self.host, plugin)
        approved = self.host.approve(plugin)
        if not approved:
            raise SelftestError(f"case {plugin!r}: approval refused: {approved.reason}")
        entry = self.host.manager.lock_entry(plugin)

        def pin(lock: Lockfile) -> Lockfile:
            return lock.with_entry(entry)

        update_lockfile(self.arena.lockfile, pin)
        self._swap(case)
        with self._host(loading=LoadingRules(locked=True)) as locked:
            enabled, reason = self._enable(locked, case)
            value: object = None
            if enabled:
                value = self._ping(locked, plugin)
                with suppress(CapletError):
                    value = locked.call(plugin, "main.run")
                locked.disable(plugin)
        return Attempt(plugin, enabled=enabled, reason=reason, value=value)

    def _restart(self, case: HostileCase) -> tuple[Attempt, list[Jail]]:
        host, plugin = self.host, case.name  # the red team's: no audit to fake
        enabled, reason = self._enable(host, case)
        if not enabled:
            return Attempt(plugin, enabled=False, reason=reason), []
        monitor = host.worker_pid(plugin)
        if monitor is None:
            raise SelftestError(f"case {plugin!r}: enabled, but no worker runs")
        jails = [find_jail(monitor)]
        value = host.call(plugin, "main.run")
        self._swap(case)
        with suppress(CapletError):
            host.call(plugin, "main.crash")
        error: CapletError | None = None
        followup: object = None
        try:
            followup = host.call(plugin, "main.run")
        except CapletError as exc:
            error = exc
        now = host.worker_pid(plugin)
        if now is not None and now != monitor:
            jails.append(find_jail(now))
        attempt = Attempt(
            plugin, enabled=True, value=value, error=error, followup=followup, jail_pid=monitor
        )
        return attempt, jails

    def _audit(self, case: HostileCase) -> Attempt:
        scenario = case.scenario
        host = self._audit_hosts.get(scenario)
        if host is None:
            operator = scenario is Scenario.AUDIT_OPERATOR_MODEL
            host = self._host(
                state_dir=self.arena.root / f"audit-state-{scenario.value}",
                auditor=GullibleAuditor("operator" if operator else "files"),
            )
            self._audit_hosts[scenario] = host
        audit = host.audit(case.name, fresh=True)
        approved = host.approve(case.name)
        return Attempt(case.name, enabled=False, audit=audit, approved=bool(approved))

    # -- containment --------------------------------------------------------------------

    def _cleanup(self, case: HostileCase, jails: list[Jail]) -> None:
        with suppress(CapletError):
            self.host.disable(case.name)
        for jail in jails:
            with suppress(OSError):
                os.close(jail.pidfd)

    def _contain(self, case: HostileCase, jails: Sequence[Jail], host: PluginHost) -> str:
        """Stop the plugin and say what (if anything) the attack left behind."""
        problems: list[str] = []
        try:
            host.disable(case.name)
        except PluginNotFoundError:
            pass  # broken by design: discovery never took it in
        except CapletError as exc:
            problems.append(f"disable failed: {exc}")
        problems += [left for left in map(jail_gone, jails) if left]
        try:
            if host.call(_CANARY_PLUGIN, "main.run") != "still serving":
                problems.append("the host no longer serves other plugins")
        except CapletError as exc:
            problems.append(f"the host no longer serves other plugins: {exc}")
        if digest_tree(self.arena.plugins_dir) != self._sources:
            problems.append("the plugin sources changed")
        store = host.manager.store
        integrity = getattr(store, "integrity_check", None)
        if callable(integrity) and tuple(integrity()) != ("ok",):
            problems.append("the state database failed its integrity check")
        if not all(idle(sock) for sock in self._listeners):
            problems.append("a plugin reached a host socket")
        if not fifo_idle(self._fifo_fd):
            problems.append("a plugin wrote into a host FIFO")
        if not alive(self.arena.decoy_pid):
            problems.append("the decoy host process was killed or stopped")
        host_tmp = sorted({p.name for d in _HOST_TMP_DIRS for p in d.glob(f"{self.arena.token}-*")})
        if host_tmp:
            problems.append(f"files left in the host's /tmp: {sorted(set(host_tmp))}")
        return "; ".join(problems)


def run_selftest(
    cases: Sequence[HostileCase],
    *,
    on_result: Callable[[CaseResult], None] | None = None,
    root: Path | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SelftestReport:
    """Run ``cases`` on one bench; ``on_result`` sees each result as it comes."""
    from caplet._sandbox._sandboxed import isolation_report

    report = isolation_report()
    started = clock()
    results: list[CaseResult] = []
    with Bench(cases, root) as bench:
        for case in cases:
            result = bench.run(case)
            results.append(result)
            if on_result is not None:
                on_result(result)
        layers: Mapping[str, str] = {**report.layers, **bench.layers}
    details = dict(report.details)
    details.update(
        {f"fix {layer}": FIXES[layer] for layer, why in layers.items() if why and FIXES.get(layer)}
    )
    return SelftestReport(tuple(results), dict(layers), details, clock() - started)
