"""The host's lifecycle: discover, audit, approve, configure, enable, disable, quarantine.

Each method is the manager's (:class:`PluginManager`) under the host's
lifecycle lock and the plugin's own lock, plus what the manager cannot do:
starting the enabled plugin's worker, and stopping (after the locks are
released) the workers a disable or quarantine retires. Apart from calling,
hooks and guest code, which use the workers these methods start and stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from caplet._audit._model import AuditResult
from caplet._config._coerce import unknown_keys_message
from caplet._config._prompt import Prompter
from caplet._errors import (
    CapletError,
    LifecycleError,
)
from caplet._findings import Finding
from caplet._host._consent import Consent, ConsentRequest
from caplet._host._host_parts import HostParts
from caplet._host._policy import Policy
from caplet._host._records import InlineConfigResult, Outcome, PluginInfo, PluginState
from caplet._host._running import RunningWorker
from caplet._manifest._model import Manifest
from caplet._scan._model import ScanReport
from caplet._trust._store import ApprovalRecord

__all__ = ["HostLifecycle"]


class HostLifecycle(HostParts):
    """Lifecycle changes of a :class:`PluginHost` (see the module docstring)."""

    # -- delegated lifecycle --------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        return self.manager.policy

    def discover(self) -> int:
        """Re-scan the plugins directory; workers of vanished plugins are stopped."""
        with self._lifecycle:
            count = self.manager.discover()
            stale = []
            for name in list(self._workers.running):
                info = self.manager.get_plugin(name)
                if info is None or info.state is not PluginState.ENABLED:
                    stale.append(name)
            retired = self._workers.detach_each(stale)
        self._workers.dispose_each(retired)
        return count

    def list_plugins(self) -> list[PluginInfo]:
        return self.manager.list_plugins()

    def get_plugin(self, name: str) -> PluginInfo | None:
        return self.manager.get_plugin(name)

    def scan(self, name: str) -> list[Finding]:
        """Static findings of the plugin's current content (nothing is executed)."""
        return self.manager.run_static_scan(name)

    def scan_report(self, name: str) -> ScanReport:
        """The plugin's full scan report (counts, mode), lint findings included."""
        return self.manager.scan_report(name)

    def audit(self, name: str, *, fresh: bool = False, static_only: bool = False) -> AuditResult:
        """Audit the current content (deep when an auditor is configured), cached by
        content hash and model; ``fresh`` re-runs it; ``static_only`` is the operator's
        choice of a static-only audit although a model is configured (used for this
        process, never cached)."""
        with self._lifecycle:
            return self.manager.audit(name, fresh=fresh, static_only=static_only)

    def approve(
        self,
        name: str,
        *,
        content_hash: str | None = None,
        programs: Sequence[str] | None = None,
        manifest: Manifest | None = None,
    ) -> Outcome:
        """Approve *name*'s current content; with ``content_hash`` (what was shown to
        the person approving) only if that is still the content, with ``programs`` (the
        lines of what its ``proc.exec`` programs bring, as shown) only if they still
        bring that, with ``manifest`` (the manifest shown: ``manager.reviewed_manifest``)
        only if it is that content's."""
        with self._lifecycle:
            return self.manager.approve(
                name, content_hash=content_hash, programs=programs, manifest=manifest
            )

    def unapprove(self, name: str) -> Outcome:
        """Remove approval; a running worker keeps serving this session."""
        with self._lifecycle:
            return self.manager.unapprove(name)

    def is_approved(self, name: str) -> bool:
        return self.manager.is_approved(name)

    def consent_request(self, name: str) -> ConsentRequest | None:
        """What enabling *name* would ask a person now (None: no consent needed, or it
        would be refused anyway); see :meth:`PluginManager.consent_request`."""
        with self._lifecycle:
            return self.manager.consent_request(name)

    def get_approval_record(self, name: str) -> ApprovalRecord | None:
        return self.manager.get_approval_record(name)

    def configure(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        prompter: Prompter | None = None,
    ) -> InlineConfigResult:
        """Apply inline ``key=value`` entries, then prompt for what must be asked.

        An inert plugin (locked mode, the allowlist) is never configured nor
        prompted for: :class:`LifecycleError` says why.
        """
        with self._lifecycle, self._guards.lock(name):
            inert = self.manager.inert_reason(name)
            if inert:
                raise LifecycleError(inert)
            result = self.manager.apply_inline_config(name, inline)
            prompter = prompter if prompter is not None else self.prompter
            # A typo'd key is refused before anything is asked: prompting for the
            # field the user meant to set would only hide the typo.
            if prompter is not None and not result.unknown:
                self.manager.prompt_config(prompter, name, skip_keys=result.applied)
            return result

    # -- enable / disable ----------------------------------------------------------------

    def enable(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        config: Mapping[str, object] | None = None,
        prompter: Prompter | None = None,
        consent: bool | Consent = False,
    ) -> Outcome:
        """Configure (``config`` replaces, ``inline`` overrides, prompts fill in) and enable.

        A plugin with no approval of its current content needs ``consent``
        (issue 14): a callback shown a :class:`ConsentRequest` (the audit with
        its canary status, the capabilities, the composition lint, what
        changed since an earlier approval) that returns ``True``, or
        ``consent=True`` when the application has shown a person that itself;
        without it the enable is refused with the fix
        (:meth:`PluginManager.enable`, docs/security.md "Consent model").

        The worker is started here, so a plugin that fails to load or
        returns undeclared functions is reported at enable time, not at its
        first call. Enabling an enabled plugin reconfigures it and restarts
        its worker. An inert plugin is refused before anything is configured
        or prompted for.
        """
        retired: list[RunningWorker] = []
        try:
            with self._lifecycle, self._guards.lock(name):
                return self._enable_locked(name, inline, config, prompter, retired, consent=consent)
        finally:
            # Outside the locks: closing the old worker waits for a call
            # still running in it (the new worker already serves new calls).
            self._workers.dispose_each(retired)

    def _enable_locked(
        self,
        name: str,
        inline: Iterable[str],
        config: Mapping[str, object] | None,
        prompter: Prompter | None,
        retired: list[RunningWorker],
        *,
        consent: bool | Consent,
    ) -> Outcome:
        """:meth:`enable` with the lifecycle and plugin locks held; workers to close
        go to ``retired``."""
        inert = self.manager.inert_reason(name)
        if inert:
            self.manager.log_decision(name, "enable", name, False, inert)
            return Outcome(False, inert)
        if config is not None:
            outcome = self.manager.set_config(name, config)
            if not outcome:
                return outcome
        result = self.configure(name, inline, prompter=prompter)
        if result.unknown:
            fields = self.manager.require_plugin(name).manifest.config
            return Outcome(False, unknown_keys_message(name, fields, result.unknown))
        outcome = self.manager.enable(name, consent=consent)
        if not outcome:
            return outcome
        old = self._workers.detach(name)
        if old is not None:
            retired.append(old)
        try:
            self._workers.start(name)
        except CapletError as exc:  # a sandbox, lifecycle or snapshot failure: not enabled
            disabled = self.manager.disable(name)
            retired += self._workers.detach_each(disabled.affected)
            return Outcome(False, str(exc))
        return outcome

    def disable(self, name: str) -> Outcome:
        """Disable (and stop the workers of) the plugin and its enabled dependants.

        The circuit breaker is kept: disabling and enabling again does not
        forgive a failing plugin.
        """
        with self._lifecycle:
            with self._guards.lock(name):
                outcome = self.manager.disable(name)
            retired = self._workers.detach_each((*outcome.affected, name)) if outcome else []
        self._workers.dispose_each(retired)
        return outcome

    # -- quarantine --------------------------------------------------------------------------

    def quarantine(self, name: str, reason: str) -> Outcome:
        """Quarantine (persisted) and stop the plugin and its enabled dependants."""
        with self._lifecycle:
            with self._guards.lock(name):
                outcome = self.manager.quarantine(name, reason)
            retired = self._workers.detach_each((*outcome.affected, name))
            self._guards.drop_breaker(name)
        self._workers.dispose_each(retired)
        return outcome

    def _follow_quarantine(self, name: str) -> None:
        """A quarantine recorded elsewhere: stop the plugin and its dependants here too."""
        with self._lifecycle:
            with self._guards.lock(name):
                outcome = self.manager.follow_quarantine(name)
            retired = self._workers.detach_each((*outcome.affected, name)) if outcome else []
            self._guards.drop_breaker(name)
        self._workers.dispose_each(retired)

    def release(self, name: str) -> Outcome:
        """Lift a quarantine (``caplet release``); refused when there was none.

        The plugin stays disabled, and its circuit breaker starts afresh.
        """
        with self._lifecycle:
            if not self.manager.release(name):
                return Outcome(False, f"plugin {name!r} is not quarantined; nothing to release")
            self._guards.drop_breaker(name)
        return Outcome(True, f"plugin {name!r} released from quarantine; enable it to use it")
