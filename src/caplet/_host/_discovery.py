"""Discovery: the plugins of a plugins directory and of installed distributions.

Reads manifests and hashes trees; never imports plugin code. A plugin that
cannot be read is skipped with the reason (:class:`BrokenPlugin`) and
discovery goes on; the plugins come back requirements first, and the ones in
a ``requires`` cycle are skipped. :class:`caplet._host._manager.PluginManager`
turns what is found into its records.
"""

from __future__ import annotations

import graphlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from caplet._display import DISTINCT_RECORD, one_line
from caplet._errors import CapletError, HostError
from caplet._host._installed import InstalledPlugin, find_installed
from caplet._host._loading import LoadingRules
from caplet._host._records import BrokenPlugin
from caplet._logs import caplet_logger
from caplet._manifest._load import MAX_MANIFEST_BYTES, find_manifest, load_manifest
from caplet._manifest._model import Manifest
from caplet._manifest._names import MANIFEST_NAMES
from caplet._trust._hashing import tree_hash_keeping
from caplet._trust._source import PluginSource, SourceKind, environment_of

__all__ = ["Discovered", "Discovery", "discover_plugins", "hash_keeping_manifest", "read_plugin"]

logger = caplet_logger()

#: Directory names discovery never treats as plugins.
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})


@dataclass(frozen=True, slots=True)
class Discovered:
    """One plugin found: its manifest, the hash of its tree, where it came from."""

    manifest: Manifest
    content_hash: str
    source: PluginSource


@dataclass(frozen=True, slots=True)
class Discovery:
    """What one discovery found: the plugins, requirements first, and what it skipped."""

    plugins: Mapping[str, Discovered]
    broken: tuple[BrokenPlugin, ...]


def read_plugin(directory: Path, *, allow_broad: bool) -> tuple[Manifest, str]:
    """The manifest and the content hash of one content of *directory*.

    The manifest is parsed from the bytes the hash read (attack13d): read by
    name before the hash, then hashed, a folder swapped in between made a
    record of one content's manifest and another's hash, and an approval of
    that hash recorded (and ``caplet approve`` showed) the other manifest's
    capabilities and agent text. The manifest is found first, so a folder
    that is no plugin is named as such before its files are read.
    """
    find_manifest(directory)
    content_hash, kept = hash_keeping_manifest(directory)
    return load_manifest(directory, allow_broad=allow_broad, hashed=kept), content_hash


def hash_keeping_manifest(directory: Path) -> tuple[str, dict[str, bytes]]:
    """The content hash of *directory* and the manifest bytes it read (for
    ``load_manifest(..., hashed=...)``)."""
    return tree_hash_keeping(directory, MANIFEST_NAMES, max_kept=MAX_MANIFEST_BYTES + 1)


def discover_plugins(
    plugins_dir: Path,
    *,
    allow_broad: bool,
    loading: LoadingRules,
    dist_path: Sequence[Path | str] | None,
) -> Discovery:
    """Find and validate every plugin of ``plugins_dir`` and, as ``loading`` allows, of
    the installed distributions on ``dist_path``.

    A missing plugins directory finds nothing; one that cannot be listed is
    a :class:`HostError` with the fix.
    """
    finder = _Finder(plugins_dir, allow_broad, loading, dist_path)
    found = finder.folders()
    finder.add_installed(found)
    ordered = finder.order({n: (m, h) for n, (m, h, _) in found.items()})
    plugins = {name: Discovered(*found[name]) for name in ordered}
    return Discovery(plugins, tuple(finder.broken))


class _Finder:
    """One discovery's state: its settings and the plugins it skipped so far."""

    def __init__(
        self,
        plugins_dir: Path,
        allow_broad: bool,
        loading: LoadingRules,
        dist_path: Sequence[Path | str] | None,
    ) -> None:
        self.plugins_dir = plugins_dir
        self.allow_broad = allow_broad
        self.loading = loading
        self.dist_path = dist_path
        self.broken: list[BrokenPlugin] = []

    def folders(self) -> dict[str, tuple[Manifest, str, PluginSource]]:
        """The plugins that are folders of the plugins directory."""
        found: dict[str, tuple[Manifest, str, PluginSource]] = {}
        try:
            exists = self.plugins_dir.is_dir()
            entries = sorted(self.plugins_dir.iterdir()) if exists else []
        except OSError as exc:  # a name too long, no permission to list it (issue 13)
            raise HostError(
                f"plugins directory {str(self.plugins_dir)[:200]!r} cannot be read "
                f"({exc.strerror or type(exc).__name__}); pass a directory caplet can list "
                "(--plugins-dir or CAPLET_PLUGINS_DIR)"
            ) from exc
        if not exists:
            logger.info("plugins directory %s does not exist; no plugins", self.plugins_dir)
        else:
            for directory in entries:
                if not directory.is_dir() or directory.is_symlink():
                    continue
                if directory.name.startswith(".") or directory.name in _SKIPPED_DIRS:
                    continue
                loaded = self.load(directory)
                if loaded is not None:
                    found[loaded[0].name] = (*loaded, PluginSource())
        return found

    def load(self, directory: Path) -> tuple[Manifest, str] | None:
        try:
            manifest, content_hash = read_plugin(directory, allow_broad=self.allow_broad)
        except CapletError as exc:
            self.skip(directory, str(exc))
            return None
        return manifest, content_hash

    def add_installed(self, found: dict[str, tuple[Manifest, str, PluginSource]]) -> None:
        """Add plugins of installed distributions (metadata only; nothing is imported).

        A name claimed by two distributions or more is a collision: none of
        them loads until one is uninstalled (issue 14; before, the first on
        the path won, so directory order decided). A folder in the plugins
        directory shadows an installed plugin of the same name.
        """
        if not self.loading.autoload and not self.loading.allowlist:
            return
        installed, skipped = find_installed(self.dist_path)
        for problem in skipped:
            self.skip(problem.location, problem.error)
        claims: dict[str, list[InstalledPlugin]] = {}
        for plugin in installed:
            if self.loading.discovers_installed(plugin.name):
                claims.setdefault(plugin.name, []).append(plugin)
        for name, claimants in claims.items():
            if name in found:
                for plugin in claimants:
                    self.skip(
                        plugin.directory,
                        f"plugin {name!r} of distribution {plugin.distribution!r} is shadowed "
                        f"by the folder {self.plugins_dir / name}; remove one of them",
                    )
                continue
            if len(claimants) > 1:
                listed = ", ".join(
                    f"{c.distribution!r} ({c.directory})"
                    for c in sorted(claimants, key=lambda c: c.distribution)
                )
                for plugin in claimants:
                    self.skip(
                        plugin.directory,
                        f"plugin {name!r} is claimed by {len(claimants)} installed "
                        f"distributions: {listed}; none of them loads until only one "
                        "provides it: uninstall the others, or rename their entry points",
                    )
                continue
            [plugin] = claimants
            loaded = self.load(plugin.directory)
            if loaded is None:
                continue
            manifest, content_hash = loaded
            if manifest.name != plugin.name:
                self.skip(
                    plugin.directory,
                    f"distribution {plugin.distribution!r}: entry point {plugin.name!r} points "
                    f"at plugin {manifest.name!r}; the entry point name must be the plugin name",
                )
                continue
            found[plugin.name] = (
                manifest,
                content_hash,
                PluginSource(
                    SourceKind.DISTRIBUTION,
                    plugin.distribution,
                    plugin.version,
                    environment_of(plugin.site),
                ),
            )

    def skip(self, directory: Path, error: str) -> None:
        # The folder's name is not caplet's (an archive's author may pick it): the logger
        # escapes it (caplet._logs), so a newline in it cannot start a line of its own in
        # the application's log (CWE-117).
        # Each skip is its own fact (DISTINCT_RECORD): a terminal shows every one, not
        # five and a count, or an operator is not told why the other folders are missing.
        logger.warning(
            "skipping plugin %s: %s",
            directory.name,
            one_line(error),
            extra={DISTINCT_RECORD: True},
        )
        self.broken.append(BrokenPlugin(directory=directory, error=error))

    def order(self, found: Mapping[str, tuple[Manifest, str]]) -> list[str]:
        """Topological order (requirements first); plugins in a cycle are skipped."""
        remaining = dict(found)
        while True:
            sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
            for name, (manifest, _) in sorted(remaining.items()):
                sorter.add(name, *(r.name for r in manifest.requires if r.name in remaining))
            try:
                return list(sorter.static_order())
            except graphlib.CycleError as exc:
                cycle: list[str] = list(exc.args[1])
                # graphlib reports the cycle closed (first node repeated last).
                path = " -> ".join(cycle)
                for name in dict.fromkeys(cycle):
                    manifest = remaining.pop(name)[0]
                    self.skip(
                        manifest.plugin_dir,
                        f"plugin {name!r}: requires cycle {path}; remove one of these "
                        "requirements so the plugins can load in order",
                    )
