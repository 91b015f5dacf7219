"""glob32: a glob capability is the files it matches, enforced by the kernel layers.

Until glob32 ``fs.read:DATA/*.csv`` was granted as all of ``DATA`` (steer31 said so on
every screen): a plugin consented to for "the CSV reports" read ``secret.key`` beside
them. Each test is an attack on that grant, run through a real PluginHost on the real
sandbox (strict: namespaces, Landlock, seccomp), then its near miss.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._errors import CapletError
from caplet._host._glob_grants import GLOB_MATCH_CAP
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory, give_to_worker

TOOLS = """
import os

def create_functions(config):
    def read(path):
        try:
            with open(path) as handle:
                return handle.read()
        except OSError as exc:
            return {"errno": exc.errno}

    def write(path, text):
        try:
            with open(path, "w") as handle:
                handle.write(text)
            return True
        except OSError as exc:
            return {"errno": exc.errno}

    def rename(path, to):
        try:
            os.rename(path, to)
            return True
        except OSError as exc:
            return {"errno": exc.errno}

    def remove(path):
        try:
            os.unlink(path)
            return True
        except OSError as exc:
            return {"errno": exc.errno}

    def listdir(path):
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            return {"errno": exc.errno}

    def crash():
        os._exit(3)

    return {"tools": {"read": read, "write": write, "rename": rename, "remove": remove,
                      "listdir": listdir, "crash": crash}}
"""

_SECRET = "TOP SECRET KEY"


def _tool(make_plugin: PluginFactory, name: str, capability: str) -> None:
    make_plugin(
        name,
        source=TOOLS,
        extra=f'capabilities = ["{capability}"]\n',
        modules='[modules.tools]\nfunctions = ["read", "write", "rename", "remove", "listdir", '
        '"crash"]\n',
    )


def _denied(answer: object) -> bool:
    """Whether a tool's answer is a refusal by the sandbox (not there, or not allowed)."""
    return isinstance(answer, dict) and answer.get("errno") in (
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.EBUSY,
        errno.EXDEV,
    )


def _notes(host: PluginHost, plugin: str) -> str:
    return " ".join(d.detail for d in host.manager.store.decisions(plugin) if d.action == "grant")


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Two CSV reports and a key beside them, the workers' own."""
    path = tmp_path / "data"
    path.mkdir()
    (path / "q1.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (path / "q2.csv").write_text("a,b\n3,4\n", encoding="utf-8")
    (path / "secret.key").write_text(_SECRET, encoding="utf-8")
    give_to_worker(path)
    return path


@pytest.mark.security
def test_a_read_glob_reads_only_the_files_it_matches(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    # The near miss: every match reads.
    assert host.call("reports", "tools.read", f"{data}/q1.csv") == "a,b\n1,2\n"
    assert host.call("reports", "tools.read", f"{data}/q2.csv") == "a,b\n3,4\n"
    # The attack: the key beside them (the whole folder was granted before glob32).
    assert _denied(host.call("reports", "tools.read", f"{data}/secret.key"))
    # Its folder lists its matches, and no other name of the host's folder.
    assert host.call("reports", "tools.listdir", str(data)) == ["q1.csv", "q2.csv"]
    # A read glob writes nothing, not even a match.
    assert _denied(host.call("reports", "tools.write", f"{data}/q1.csv", "x"))
    assert "matches 2 file(s) now" in _notes(host, "reports")


@pytest.mark.security
def test_a_matching_name_that_is_a_link_is_not_followed(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    (data / "key.csv").symlink_to("secret.key")
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    assert _denied(host.call("reports", "tools.read", f"{data}/key.csv"))
    assert host.call("reports", "tools.listdir", str(data)) == ["q1.csv", "q2.csv"]
    assert f"{data}/key.csv (a symbolic link: never followed)" in _notes(host, "reports")


@pytest.mark.security
def test_a_hard_link_named_like_a_match_is_left_out(
    host: PluginHost, make_plugin: PluginFactory, data: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.key"
    outside.write_text(_SECRET, encoding="utf-8")
    give_to_worker(outside)
    os.link(outside, data / "stolen.csv")
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    assert _denied(host.call("reports", "tools.read", f"{data}/stolen.csv"))
    assert host.call("reports", "tools.read", f"{data}/q1.csv") == "a,b\n1,2\n"
    assert f"{data}/stolen.csv (a file with 2 names (hard links)" in _notes(host, "reports")


@pytest.mark.security
def test_a_matching_directory_grants_nothing_below_it(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    inner = data / "archive.csv"
    inner.mkdir()
    (inner / "id_rsa").write_text(_SECRET, encoding="utf-8")
    give_to_worker(inner)
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    assert _denied(host.call("reports", "tools.read", f"{inner}/id_rsa"))
    assert f"{inner} (a directory: a glob grants files" in _notes(host, "reports")


@pytest.mark.security
def test_a_glob_in_a_middle_folder_grants_its_matches_only(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    top = tmp_path / "srv"
    for project in ("a", "b"):
        (top / project).mkdir(parents=True)
        (top / project / "report").write_text(f"report {project}", encoding="utf-8")
        (top / project / "notes").write_text(_SECRET, encoding="utf-8")
    (top / "c").symlink_to(tmp_path)  # a folder link on the way: never followed
    (tmp_path / "report").write_text(_SECRET, encoding="utf-8")
    give_to_worker(top)
    _tool(make_plugin, "reports", f"fs.read:{top}/*/report")
    host.discover()
    assert host.enable("reports", consent=True)
    assert host.call("reports", "tools.read", f"{top}/a/report") == "report a"
    assert host.call("reports", "tools.read", f"{top}/b/report") == "report b"
    assert _denied(host.call("reports", "tools.read", f"{top}/a/notes"))
    assert _denied(host.call("reports", "tools.read", f"{top}/c/report"))
    assert host.call("reports", "tools.listdir", str(top)) == ["a", "b"]
    assert host.call("reports", "tools.listdir", f"{top}/a") == ["report"]


@pytest.mark.security
def test_a_pattern_that_could_match_dot_dot_stays_in_its_folder(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    # Held on main too (the folder's bind mount has no parent inside the jail); kept so
    # that matching names never starts to climb: '.*' and '[.][.]' match no '..' entry.
    sub = data / "sub"
    sub.mkdir()
    (sub / ".hidden").write_text("hidden", encoding="utf-8")
    give_to_worker(sub)
    _tool(make_plugin, "dots", f"fs.read:{sub}/.*")
    _tool(make_plugin, "dotdot", f"fs.read:{sub}/[.][.]/secret.key")
    host.discover()
    assert host.enable("dots", consent=True)
    assert host.call("dots", "tools.read", f"{sub}/.hidden") == "hidden"
    assert _denied(host.call("dots", "tools.read", f"{sub}/../secret.key"))
    assert host.enable("dotdot", consent=True)
    assert _denied(host.call("dotdot", "tools.read", f"{data}/secret.key"))
    assert _denied(host.call("dotdot", "tools.read", f"{sub}/../secret.key"))
    assert "matches 0 file(s) now" in _notes(host, "dotdot")


@pytest.mark.security
def test_a_star_does_not_match_a_hidden_name(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    (data / ".secret.csv").write_text(_SECRET, encoding="utf-8")
    give_to_worker(data)
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    assert _denied(host.call("reports", "tools.read", f"{data}/.secret.csv"))


@pytest.mark.security
def test_a_match_swapped_after_enable_never_reaches_a_worker(
    host: PluginHost, make_plugin: PluginFactory, data: Path, tmp_path: Path
) -> None:
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    assert host.call("reports", "tools.read", f"{data}/q1.csv") == "a,b\n1,2\n"
    # Someone who may write the folder puts the key's content where a match was.
    swapped = data / "q1.csv.new"
    swapped.write_text(_SECRET, encoding="utf-8")
    give_to_worker(swapped)
    os.replace(swapped, data / "q1.csv")
    (data / "q2.csv").unlink()
    (data / "q2.csv").symlink_to("secret.key")
    # The running worker keeps the inodes it was given.
    assert host.call("reports", "tools.read", f"{data}/q1.csv") == "a,b\n1,2\n"
    with pytest.raises(CapletError):
        host.call("reports", "tools.crash")
    # The next start opens each match again without links and insists on its inode.
    with pytest.raises(CapletError) as info:
        host.call("reports", "tools.read", f"{data}/q1.csv")
    assert "enable the plugin again" in str(info.value)


@pytest.mark.security
def test_a_file_that_appears_after_enable_is_not_granted(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    host.discover()
    assert host.enable("reports", consent=True)
    (data / "q3.csv").write_text("a,b\n5,6\n", encoding="utf-8")
    give_to_worker(data)
    with pytest.raises(CapletError):
        host.call("reports", "tools.crash")
    assert _denied(host.call("reports", "tools.read", f"{data}/q3.csv"))
    # Enabled again, it is matched.
    assert host.disable("reports")
    assert host.enable("reports", consent=True)
    assert host.call("reports", "tools.read", f"{data}/q3.csv") == "a,b\n5,6\n"


@pytest.mark.security
def test_a_write_glob_writes_its_matches_in_place_and_creates_nothing(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.json").write_text("{}", encoding="utf-8")
    (out / "keep.txt").write_text("keep", encoding="utf-8")
    give_to_worker(out)
    _tool(make_plugin, "writer", f"fs.write:{out}/*.json")
    host.discover()
    assert host.enable("writer", consent=True)
    # The near miss: a match is written in place, and read back.
    assert host.call("writer", "tools.write", f"{out}/a.json", '{"n": 1}') is True
    assert (out / "a.json").read_text(encoding="utf-8") == '{"n": 1}'
    assert host.call("writer", "tools.read", f"{out}/a.json") == '{"n": 1}'
    # The attacks: a name the glob does not match, one it does (new names are not held
    # to the pattern by the kernel layers: none is made), the file beside, a rename.
    assert _denied(host.call("writer", "tools.write", f"{out}/run.sh", "evil"))
    assert _denied(host.call("writer", "tools.write", f"{out}/b.json", "{}"))
    assert _denied(host.call("writer", "tools.write", f"{out}/keep.txt", "gone"))
    assert _denied(host.call("writer", "tools.rename", f"{out}/a.json", f"{out}/a.sh"))
    assert _denied(host.call("writer", "tools.remove", f"{out}/a.json"))
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "keep.txt"]
    assert host.call("writer", "tools.listdir", str(out)) == ["a.json"]
    assert (out / "keep.txt").read_text(encoding="utf-8") == "keep"


@pytest.mark.security
def test_a_write_glob_never_rewrites_a_file_with_another_name(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    profile = tmp_path / "bashrc"
    profile.write_text("# profile\n", encoding="utf-8")
    give_to_worker(out, profile)
    os.link(profile, out / "x.json")
    _tool(make_plugin, "writer", f"fs.write:{out}/*.json")
    host.discover()
    assert host.enable("writer", consent=True)
    assert _denied(host.call("writer", "tools.write", f"{out}/x.json", "curl evil | sh\n"))
    assert profile.read_text(encoding="utf-8") == "# profile\n"


@pytest.mark.security
def test_a_glob_with_too_many_matches_is_refused_naming_the_fix(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for index in range(GLOB_MATCH_CAP + 1):
        (many / f"r{index}.csv").write_text("x", encoding="utf-8")
    give_to_worker(many)
    _tool(make_plugin, "reports", f"fs.read:{many}/*.csv")
    host.discover()
    refused = host.enable("reports", consent=True)
    assert not refused
    assert refused.reason == (
        f"plugin 'reports': capability 'fs.read:{many}/*.csv' matches more than "
        f"{GLOB_MATCH_CAP} files, the most one glob may grant "
        "(each file is bound and ruled by itself at every worker start); grant the folder "
        f"itself (fs.read:{many}) if the plugin needs all of it, or a narrower glob"
    )
    # The near miss: at the cap, it is granted.
    (many / "r0.csv").unlink()
    assert host.enable("reports", consent=True)
    assert host.call("reports", "tools.read", f"{many}/r1.csv") == "x"


def test_near_miss_the_folder_and_a_file_by_name_still_grant_what_they_say(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    _tool(make_plugin, "folder", f"fs.read:{data}")
    _tool(make_plugin, "one", f"fs.read:{data}/q1.csv")
    host.discover()
    assert host.enable("folder", consent=True)
    assert host.call("folder", "tools.read", f"{data}/secret.key") == _SECRET
    assert host.call("folder", "tools.listdir", str(data)) == ["q1.csv", "q2.csv", "secret.key"]
    assert host.enable("one", consent=True)
    assert host.call("one", "tools.read", f"{data}/q1.csv") == "a,b\n1,2\n"
    assert _denied(host.call("one", "tools.read", f"{data}/q2.csv"))


@pytest.mark.security
def test_a_consent_request_carries_what_a_glob_reaches(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    # steer31's residual: a program asking for consent saw the glob alone.
    _tool(make_plugin, "reports", f"fs.read:{data}/*.csv")
    _tool(make_plugin, "folder", f"fs.read:{data}")
    host.discover()
    request = host.consent_request("reports")
    assert request is not None
    assert request.globs == (
        f"fs.read:{data}/*.csv -> only the files of {data} it matches, read-only",
    )
    plain = host.consent_request("folder")
    assert plain is not None
    assert plain.globs == ()


def test_near_miss_a_write_glob_inside_a_read_folder_keeps_both(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    # The glob's folder is granted whole too: the host's folder is shown (every name),
    # and the glob's matches are writable in it.
    make_plugin(
        "both",
        source=TOOLS,
        extra=f'capabilities = ["fs.read:{data}", "fs.write:{data}/*.csv"]\n',
        modules='[modules.tools]\nfunctions = ["read", "write", "listdir"]\n',
    )
    host.discover()
    assert host.enable("both", consent=True)
    assert host.call("both", "tools.listdir", str(data)) == ["q1.csv", "q2.csv", "secret.key"]
    assert host.call("both", "tools.read", f"{data}/secret.key") == _SECRET
    assert host.call("both", "tools.write", f"{data}/q1.csv", "x,y\n") is True
    assert (data / "q1.csv").read_text(encoding="utf-8") == "x,y\n"
    assert _denied(host.call("both", "tools.write", f"{data}/secret.key", "gone"))
    assert _denied(host.call("both", "tools.write", f"{data}/new.csv", "x"))
