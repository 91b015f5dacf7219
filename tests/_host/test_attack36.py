"""attack36: attack35's descriptor chain (``chain_from_fd``) on a granted folder the
host's user may list but not search: a lookup of ``.`` or ``..`` in it needs its search
permission (path_resolution(7)), so the enable ended in a PermissionError traceback where
the chain by path had reached the worker's access check. Reproduced where the host is
not root (``capletci``); a root host searches any folder, and the worker's check says no."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._identity import worker_identity
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory, give_to_worker


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


@pytest.fixture
def unsearchable(tmp_path: Path) -> Iterator[Path]:
    """A folder of reports the worker owns, listable (``r``) but not searchable (no ``x``)."""
    path = tmp_path / "reports"
    path.mkdir()
    (path / "a.txt").write_text("a\n", encoding="utf-8")
    give_to_worker(path)
    path.chmod(0o644)
    yield path
    path.chmod(0o755)


@pytest.mark.security
@pytest.mark.parametrize("pattern", ["", "/*.txt"])
def test_a_granted_folder_the_host_may_not_search_is_refused_with_a_fix(
    host: PluginHost, make_plugin: PluginFactory, unsearchable: Path, pattern: str
) -> None:
    capability = f"fs.read:{unsearchable}{pattern}"
    make_plugin("reader", extra=f'capabilities = ["{capability}"]\n')
    host.discover()
    refused = host.enable("reader", consent=True)  # on cafd41c7: PermissionError: '.'
    assert not refused
    assert refused.reason.startswith(f"plugin 'reader': capability {capability!r}")
    if worker_identity().privileged:
        assert "may not" in refused.reason, refused.reason
        return  # a root host searches it: the worker's own check refuses it
    assert f"{unsearchable}: caplet cannot read the folders above it (Permission denied)" in (
        refused.reason
    )
    assert "make it searchable (chmod u+x" in refused.reason


@pytest.mark.security
def test_near_miss_a_searchable_folder_and_its_glob_are_granted(
    host: PluginHost, make_plugin: PluginFactory, unsearchable: Path
) -> None:
    unsearchable.chmod(0o755)
    listed = f'"fs.read:{unsearchable}", "fs.read:{unsearchable}/*.txt"'
    make_plugin("reader", extra=f"capabilities = [{listed}]\n")
    host.discover()
    enabled = host.enable("reader", consent=True)
    assert enabled, enabled.reason
