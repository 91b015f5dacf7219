"""Plugins shipped as distributions: found from metadata only, hashed from the files on disk."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._host._installed import extract_wheel_plugin, find_installed
from caplet._host._loading import LoadingRules
from caplet._host._plugin_record import plugin_location
from caplet._trust._hashing import tree_hash
from caplet._trust._source import PluginSource, SourceKind
from tests.conftest import PluginFactory, make_distribution, make_wheel


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.setenv("CAPLET_TEST_IMPORT_MARKER", str(tmp_path / "imported"))
    return path


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, site: Path) -> Iterator[PluginHost]:
    with PluginHost(
        plugins_dir, state_dir=state_dir, dist_path=[site], loading=LoadingRules()
    ) as h:
        yield h


def test_find_installed_reads_entry_points(site: Path) -> None:
    folder = make_distribution(site)
    found, skipped = find_installed([site])
    assert skipped == []
    [plugin] = found
    assert (plugin.name, plugin.directory, plugin.distribution, plugin.version) == (
        "hello",
        folder,
        "acme-plugins",
        "1.2.0",
    )


def test_discovery_imports_nothing_and_hashes_the_files_on_disk(
    host: PluginHost, site: Path, tmp_path: Path
) -> None:
    folder = make_distribution(site)
    host.discover()
    info = host.manager.require_plugin("hello")
    assert info.source.kind is SourceKind.DISTRIBUTION
    assert (info.source.distribution, info.source.distribution_version) == ("acme-plugins", "1.2.0")
    assert info.content_hash == tree_hash(folder), "not the (lying) RECORD"
    assert not (tmp_path / "imported").exists(), "the distribution's code never ran in the host"
    assert "acme_plugins" not in sys.modules
    assert host.enable("hello", consent=True)
    assert host.call("hello", "main.run", 1) == {"args": [1], "config": {}}
    assert not (tmp_path / "imported").exists()


@pytest.mark.parametrize(
    "name", ["acme-plugins in /srv/app", "acme_plugins;x", "acme plugins", "-acme"]
)
def test_a_distribution_whose_name_is_no_name_is_skipped(site: Path, name: str) -> None:
    # attack16: the name is part of an installed plugin's place, "distribution NAME in
    # ROOT"; a name holding " in " is another environment's place.
    assert plugin_location(
        PluginSource(SourceKind.DISTRIBUTION, "acme-plugins in /srv/app", "1", "/x"), site
    ) == plugin_location(
        PluginSource(SourceKind.DISTRIBUTION, "acme-plugins", "1", "/srv/app in /x"), site
    )
    make_distribution(site)
    [metadata] = site.glob("*.dist-info/METADATA")
    text = metadata.read_text(encoding="utf-8")
    metadata.write_text(text.replace("Name: acme-plugins", f"Name: {name}"), encoding="utf-8")
    found, skipped = find_installed([site])
    assert found == []
    [problem] = skipped
    assert problem.location == site
    assert f"distribution {name!r} is not a valid distribution name" in problem.error
    assert "reinstall it from a correct build" in problem.error


@pytest.mark.parametrize("name", ["Acme_Plugins.x", "a", "acme-plugins2"])
def test_a_distribution_name_in_any_spelling_pep_508_allows_loads(site: Path, name: str) -> None:
    # Near miss: upper case, '_' and '.', one letter are names.
    make_distribution(site)
    [metadata] = site.glob("*.dist-info/METADATA")
    text = metadata.read_text(encoding="utf-8")
    metadata.write_text(text.replace("Name: acme-plugins", f"Name: {name}"), encoding="utf-8")
    found, skipped = find_installed([site])
    assert skipped == []
    assert [plugin.distribution for plugin in found] == [name]


@pytest.mark.parametrize(
    ("entry_point", "expected"),
    [
        ("acme_plugins:../../etc", "does not name a plugin folder"),
        ("not a module", "does not name a plugin folder"),
        ("acme_plugins:missing", "which is not a directory"),
    ],
)
def test_bad_entry_points_are_skipped_with_the_reason(
    host: PluginHost, site: Path, entry_point: str, expected: str
) -> None:
    make_distribution(site, entry_point=entry_point)
    assert host.discover() == 0
    [broken] = host.manager.broken_plugins()
    assert "distribution 'acme-plugins': entry point 'hello'" in broken.error
    assert expected in broken.error


def test_entry_point_name_must_be_the_plugin_name(host: PluginHost, site: Path) -> None:
    make_distribution(site, entry_point="acme_plugins:hello")
    other = site / "acme_plugins-1.2.0.dist-info" / "entry_points.txt"
    other.write_text("[caplet.plugins]\ngreeter = acme_plugins:hello\n")
    assert host.discover() == 0
    [broken] = host.manager.broken_plugins()
    assert "entry point 'greeter' points at plugin 'hello'" in broken.error


def test_a_folder_plugin_shadows_an_installed_one(
    host: PluginHost, site: Path, make_plugin: PluginFactory
) -> None:
    make_distribution(site)
    make_plugin("hello")
    assert host.discover() == 1
    assert host.manager.require_plugin("hello").source.kind is SourceKind.DIRECTORY
    [broken] = host.manager.broken_plugins()
    assert (
        "plugin 'hello' of distribution 'acme-plugins' is shadowed by the folder "
        f"{host.manager.plugins_dir / 'hello'}; remove one of them" == broken.error
    )


def test_autoload_off_skips_installed_plugins_unless_allowlisted(
    plugins_dir: Path, state_dir: Path, site: Path
) -> None:
    make_distribution(site)
    off = LoadingRules(autoload=False)
    with PluginHost(plugins_dir, state_dir=state_dir, dist_path=[site], loading=off) as h:
        assert h.manager.names() == []
    listed = LoadingRules(autoload=False, allowlist=frozenset({"hello"}))
    with PluginHost(plugins_dir, state_dir=state_dir, dist_path=[site], loading=listed) as h:
        assert h.manager.names() == ["hello"]


def test_extract_wheel_plugin(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "acme_plugins-2.0-py3-none-any.whl", plugin_version="2.0.0")
    folder = extract_wheel_plugin(wheel, "hello", tmp_path / "out")
    assert folder == tmp_path / "out" / "hello"
    assert sorted(p.name for p in folder.iterdir()) == ["plugin.py", "plugin.toml"]
    assert 'version = "2.0.0"' in (folder / "plugin.toml").read_text()


def test_extract_wheel_refuses_unsafe_members(tmp_path: Path) -> None:
    import zipfile

    from caplet._errors import PluginTreeError

    wheel = make_wheel(tmp_path / "evil.whl")
    with zipfile.ZipFile(wheel, "a") as archive:
        link = zipfile.ZipInfo("acme_plugins/hello/link.py")
        link.external_attr = 0o120777 << 16  # a symbolic link
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(
        PluginTreeError, match=r"'acme_plugins/hello/link\.py' is not a regular file"
    ):
        extract_wheel_plugin(wheel, "hello", tmp_path / "out")
    with pytest.raises(PluginTreeError, match="declares no entry point 'other'"):
        extract_wheel_plugin(wheel, "other", tmp_path / "out2")


@pytest.mark.parametrize(
    ("members", "refused"),
    [
        # The same name twice: zipfile keeps both, an installer the last one.
        (("plugin.py", "plugin.py"), "plugin.py"),
        # A file and a folder of one name.
        (("extra", "extra/mod.py"), "extra/mod.py"),
        (("extra/mod.py", "extra"), "extra"),
    ],
)
def test_a_wheel_whose_members_collide_is_refused_not_a_crash(
    tmp_path: Path, members: tuple[str, str], refused: str
) -> None:
    import warnings
    import zipfile

    from caplet._errors import PluginTreeError

    wheel = make_wheel(tmp_path / "evil.whl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name: the attack
        with zipfile.ZipFile(wheel, "a") as archive:
            for member in members:
                archive.writestr(f"acme_plugins/hello/{member}", "x = 1\n")
    with pytest.raises(PluginTreeError) as caught:
        extract_wheel_plugin(wheel, "hello", tmp_path / "out")
    message = str(caught.value)
    assert f"member 'acme_plugins/hello/{refused}'" in message, message
    assert "the name of another member" in message, message
    assert "rebuild the wheel" in message, message


def test_an_entry_point_into_another_distributions_folder_is_skipped_with_both_names(
    host: PluginHost, site: Path
) -> None:
    """Issue 14: the plugin was credited to the distribution that merely claimed it."""
    folder = make_distribution(site, "hello")
    # A second distribution, no plugin of its own, whose entry point names acme's folder.
    make_distribution(site, "other", dist="evil-plugins", entry_point="acme_plugins:hello")
    host.discover()
    info = host.manager.require_plugin("hello")
    assert info.source.distribution == "acme-plugins"
    [broken] = host.manager.broken_plugins()
    assert broken.directory == folder
    assert broken.error.startswith(
        f"distribution 'evil-plugins': entry point 'other' points at {folder}, which belongs "
        "to distribution 'acme-plugins', not to 'evil-plugins'"
    )


def test_an_entry_point_into_a_folder_nobody_ships_is_skipped(host: PluginHost, site: Path) -> None:
    folder = make_distribution(site)
    (site / "acme_plugins-1.2.0.dist-info" / "RECORD").write_text("acme_plugins/__init__.py,,\n")
    assert host.discover() == 0
    [broken] = host.manager.broken_plugins()
    assert f"points at {folder}, but 'acme-plugins''s RECORD lists no file there" in broken.error
    assert "cannot tell whose plugin it is" in broken.error


@pytest.mark.parametrize("order", ["acme-first", "other-first"])
def test_two_distributions_claiming_one_name_is_a_collision_and_neither_loads(
    plugins_dir: Path, state_dir: Path, tmp_path: Path, order: str
) -> None:
    """Issue 14: reported as shadowed by a folder that does not exist; order decided."""
    first, second = tmp_path / "site-a", tmp_path / "site-b"
    acme = make_distribution(first if order == "acme-first" else second, "hello")
    other = make_distribution(
        second if order == "acme-first" else first, "hello", dist="other-plugins"
    )
    with PluginHost(
        plugins_dir, state_dir=state_dir, dist_path=[first, second], loading=LoadingRules()
    ) as h:
        assert h.manager.names() == []
        broken = h.manager.broken_plugins()
    assert sorted(b.directory for b in broken) == sorted([acme, other])
    expected = (
        f"plugin 'hello' is claimed by 2 installed distributions: 'acme-plugins' ({acme}), "
        f"'other-plugins' ({other}); none of them loads until only one provides it"
    )
    assert all(b.error.startswith(expected) for b in broken)
    assert not any("shadowed" in b.error for b in broken)
