"""The plugin lifecycle: discover, audit, approve, configure, enable, disable.

This mirrors the Plugin Manager API of seed 000 in snake_case, with the
gaps it documents closed:

* approval requires an audit *of the current content hash* (the seed only
  checked that some audit existed);
* the content hash covers the whole tree, not only the entry file;
* the approved fast path re-checks the stored risk level against the policy
  in force now, so tightening ``max_risk_level`` binds after a restart too;
* ``requires`` between plugins is honoured in load order, on enable and on
  disable;
* with an LLM auditor configured (``auditor``, by default from the
  ``CAPLET_LLM_*`` environment), audits are deep audits with canaries, cached
  per content hash *and* model; a model that fails gives a labelled
  static-only result that is used for this process but not cached, so the
  next audit asks the model again.

Enablement and configuration live in memory only (per process, as in the
seed: configuration such as base paths is session-specific); approval,
audits, quarantine and the decision log persist in the :class:`TrustStore`.
Nothing here runs plugin code: workers are the :class:`PluginHost`'s job.

:class:`PluginManager` is assembled from one class per concern, each in its
own module and each building on the ones below it: the shared state
(:mod:`._manager_state`), audits (:mod:`._manager_audit`), discovery and the
lock file (:mod:`._manager_discover`), approval (:mod:`._manager_approval`),
configuration (:mod:`._manager_config`), enable and disable
(:mod:`._manager_enable`). This module adds quarantine and what a host reads
of the enabled plugins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from caplet._capabilities._model import Capability, CapabilityKind
from caplet._host._grant_check import GrantPlan
from caplet._host._locked import (
    withheld_message,
)
from caplet._host._manager_enable import ManagerEnable
from caplet._host._records import (
    Outcome,
    PluginState,
)
from caplet._host._system_message import system_message
from caplet._host._validate import FunctionValidator
from caplet._logs import caplet_logger
from caplet._manifest._model import Hook
from caplet._trust._snapshot import Snapshot
from caplet._trust._store import QuarantineRecord

__all__ = ["PluginManager"]

logger = caplet_logger()


class PluginManager(ManagerEnable):
    """Discovers plugins and drives their lifecycle.

    Plugins come from the folders of ``plugins_dir`` and, unless autoload is
    off, from installed distributions on ``dist_path`` (default
    ``sys.path``; :mod:`caplet._host._installed`). ``store`` is a
    :class:`TrustStore`, or an address for :func:`caplet._trust._open.open_store`
    (``postgresql://…`` for a fleet's shared store, a state directory); it
    defaults to what ``CAPLET_STORE`` names, else a :class:`SqliteStore` in
    ``state_dir`` (itself defaulting to ``$CAPLET_STATE_DIR`` or the
    platform's user state dir). The state directory stays node-local either
    way (run directory, snapshots, keys, update journals). ``lockfile``
    defaults to ``caplet.lock`` beside the plugins directory; ``loading``
    (locked mode, allowlist, autoload, strictness) defaults to what the
    environment says (:class:`LoadingRules`).
    ``auditor`` is the LLM auditor: ``"env"`` (the default) reads
    ``CAPLET_LLM_*`` when the first audit needs it (unset: static-only),
    ``None`` forces static-only, or pass an :class:`AuditorProvider`.
    """

    def hook_subscribers(self, event: str) -> list[tuple[str, Hook, tuple[Capability, ...]]]:
        """``(plugin, hook, granted capabilities)`` of each enabled plugin subscribed to *event*.

        Read from the records directly (no store queries), because an
        application may emit on a hot path.
        """
        found: list[tuple[str, Hook, tuple[Capability, ...]]] = []
        for record in self._records.values():
            if record.state is not PluginState.ENABLED:
                continue
            # The subscriptions of the content it runs, not of a manifest swapped
            # into its folder since (textpin; red-team round 4's consent).
            hook = (record.enabled_manifest or record.manifest).hook(event)
            if hook is not None:
                found.append((record.name, hook, record.resolved))
        return found

    def requirement_graph(self) -> dict[str, tuple[str, ...]]:
        """``{plugin: names of the plugins it requires}`` for every discovered plugin."""
        return {
            name: tuple(r.name for r in record.manifest.requires)
            for name, record in self._records.items()
        }

    def grant_plan(self, name: str) -> GrantPlan:
        """The pinned fs grants of the enabled plugin (empty when it is not enabled)."""
        return self._record(name).grant_plan

    def enabled_hash(self, name: str) -> str | None:
        """The content hash verified when ``name`` was enabled (None if not enabled)."""
        return self._record(name).enabled_hash

    def withheld_reason(self, name: str, wanted: Capability | None, kind: CapabilityKind) -> str:
        """Why the enabled plugin *name* lacks *wanted* (or any capability of *kind*) when
        the lock withholds a declared one ("" when nothing withheld explains it).

        A ``ctx`` refusal quotes it instead of "declare it": it is declared.
        """
        related = tuple(
            c
            for c in self._record(name).withheld
            if c.kind is kind and (wanted is None or c == wanted)
        )
        return withheld_message(name, related, self.lockfile_path) if related else ""

    def validators(self, name: str) -> Mapping[str, FunctionValidator]:
        """The compiled function schemas of the enabled content (empty when none are declared)."""
        return self._record(name).validators

    # -- quarantine ----------------------------------------------------------------------------

    def quarantine(self, name: str, reason: str) -> Outcome:
        """Take a plugin out of service until :meth:`release` (persisted).

        An enabled plugin is disabled, with its enabled dependants; the
        outcome's ``affected`` names those dependants.
        """
        record = self._record(name)
        self.store.put_quarantine(
            QuarantineRecord(
                name=name,
                reason=reason,
                since=time.time(),
                location=record.location,
                content_hash=record.enabled_hash or record.content_hash,
            )
        )
        affected: tuple[str, ...] = ()
        if record.state is PluginState.ENABLED:
            affected = self.disable(name).affected
        self._log(name, "quarantine", name, False, reason)
        return Outcome(True, f"plugin {name!r} quarantined: {reason}", affected=affected)

    def follow_quarantine(self, name: str) -> Outcome:
        """Disable *name* here if the store says it is quarantined but it is still enabled.

        Another process or node recorded the quarantine (issue 18): this one
        takes the plugin (and its enabled dependants) out of service as the
        quarantining one did, so a later release leaves it disabled on every
        node alike. Falsy when there was nothing to do.
        """
        record = self._record(name)
        quarantine = self.store.get_quarantine(
            name, record.location, record.enabled_hash or record.content_hash
        )
        if quarantine is None or record.state is not PluginState.ENABLED:
            return Outcome(False, f"plugin {name!r} has no quarantine to follow here")
        outcome = self.disable(name)
        # The reason may be another host's or an older caplet's: the logger escapes it
        # (caplet._logs), as every argument of its records.
        logger.warning(
            "plugin %s was quarantined elsewhere (%s); disabled here", name, quarantine.reason
        )
        return Outcome(True, f"plugin {name!r} quarantined elsewhere", affected=outcome.affected)

    def release(self, name: str) -> bool:
        """Lift the quarantines that stop this plugin (its name at its place, of its
        content anywhere, one recorded before caplet kept places); False when there was
        none.

        Another project's plugin of the same name keeps its own (decide14).
        """
        record = self._record(name)
        released = self.store.delete_quarantine(name, record.location, record.content_hash)
        if released:
            self._log(name, "release", name, True)
        return released

    # -- agent integration -----------------------------------------------------------------------

    def get_system_message_additions(self) -> list[str]:
        """One text block per enabled plugin telling an agent how to use it."""
        return [
            system_message(r.enabled_manifest or r.manifest)
            for r in self._records.values()
            if r.state is PluginState.ENABLED
        ]

    def enabled_snapshot(self, name: str) -> Snapshot | None:
        """The snapshot the plugin was enabled from (None when it is not enabled)."""
        return self._record(name).snapshot

    def __enter__(self) -> PluginManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
