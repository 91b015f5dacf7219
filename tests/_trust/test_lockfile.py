"""caplet.lock: strict reading, deterministic atomic writing, serialised updates."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._audit._model import Verdict
from caplet._errors import LockfileError, LockfileWriteError
from caplet._findings import RiskLevel
from caplet._trust._lockfile import (
    LockEntry,
    Lockfile,
    LockSignature,
    check_lockfile,
    read_lockfile,
    render_lockfile,
    update_lockfile,
    write_lockfile,
)
from caplet._trust._problems import ProblemKind
from caplet._trust._source import SourceKind
from tests.conftest import PluginFactory

DIGEST = "sha256-" + "a" * 64
WHEN = dt.datetime(2026, 7, 1, 12, 0, 0, tzinfo=dt.UTC)


def entry(name: str = "hello", **changes: object) -> LockEntry:
    values: dict[str, object] = {
        "name": name,
        "version": "1.0.0",
        "source": SourceKind.DIRECTORY,
        "digest": DIGEST,
        "capabilities": ("net.http:https://b.example", "env.read:A"),
        "risk_level": RiskLevel.LOW,
        "verdict": Verdict.APPROVE,
        "audit_provider": "static-only",
        "approved_at": WHEN,
    }
    values.update(changes)
    return LockEntry(**values)  # type: ignore[arg-type]


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    signed = entry(
        "signed",
        capabilities=("env.read:A",),
        source=SourceKind.DISTRIBUTION,
        distribution="acme-plugins",
        signature=LockSignature(key_id="7A4CB98A0C9ED25C", public_key="RWRc"),
    )
    lock = Lockfile(path).with_entry(entry()).with_entry(signed)
    write_lockfile(lock)
    again = read_lockfile(path)
    assert again.names == ("hello", "signed")
    assert again.entry("signed") == signed
    # Capabilities are written sorted; their order carries no meaning.
    assert again.entry("hello") == entry(capabilities=("env.read:A", "net.http:https://b.example"))


def test_an_entry_names_the_model_and_server_of_its_review(tmp_path: Path) -> None:
    """steer35: a model's entry records the model and the API root it answered from;
    an entry written before them (the provider alone) reads as no known review."""
    path = tmp_path / "caplet.lock"
    root = "https://api.openai.com:443/v1"
    model = entry(audit_provider="openai", audit_model="gpt-4o", audit_endpoint=root)
    write_lockfile(Lockfile(path).with_entry(model))
    text = path.read_text()
    assert f'audit_model = "gpt-4o"\naudit_endpoint = "{root}"\n' in text
    again = read_lockfile(path).entry("hello")
    assert again is not None
    assert again.review == f"openai:gpt-4o at {root}"
    old = "".join(line for line in text.splitlines(True) if not line.startswith("audit_"))
    path.write_text(old.replace("approved_at", 'audit_provider = "openai"\napproved_at'))
    before = read_lockfile(path).entry("hello")
    assert before is not None
    assert (before.audit_provider, before.audit_model, before.review) == ("openai", "", None)
    assert entry().review == "static-only"
    # A static entry writes neither key: the same bytes as before steer35.
    write_lockfile(Lockfile(path).with_entry(entry()))
    assert "audit_model" not in path.read_text()


def test_rendering_is_deterministic_and_diffable(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    one = Lockfile(path).with_entry(entry("b")).with_entry(entry("a"))
    two = Lockfile(path).with_entry(entry("a")).with_entry(entry("b"))
    assert render_lockfile(one) == render_lockfile(two)
    text = render_lockfile(one)
    assert text.index("[plugins.a]") < text.index("[plugins.b]")
    assert 'digest = "sha256-' in text
    assert "approved_at = 2026-07-01 12:00:00+00:00" in text, "a TOML offset date-time"
    assert text.startswith("# caplet.lock")


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    path.write_text("old content")
    write_lockfile(Lockfile(path).with_entry(entry()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caplet.lock"]
    assert read_lockfile(path).names == ("hello",)
    assert path.stat().st_mode & 0o777 == 0o644


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    assert read_lockfile(path, missing_ok=True).entries == ()
    with pytest.raises(LockfileError, match="does not exist; approve the plugins") as info:
        read_lockfile(path)
    assert info.value.path == str(path)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


VALID = """
version = 1
[plugins.hello]
version = "1.0.0"
source = "directory"
digest = "sha256-{a}"
capabilities = []
risk_level = "LOW"
verdict = "approve"
audit_provider = "static-only"
approved_at = 2026-07-01T12:00:00Z
""".replace("{a}", "a" * 64)


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        (('digest = "sha256-' + "a" * 64 + '"', 'digest = "md5-1"'), "digest", "64 lower-case hex"),
        (('risk_level = "LOW"', 'risk_level = "LOWISH"'), "risk_level", "unknown risk level"),
        (('verdict = "approve"', "verdict = 3"), "verdict", "expected a non-empty string"),
        (("capabilities = []", 'capabilities = "fs.read:/x"'), "capabilities", "a list of"),
        (('source = "directory"', 'source = "pypi"'), "source", "unknown source 'pypi'"),
        (
            ("approved_at = 2026-07-01T12:00:00Z", 'approved_at = "yesterday"'),
            "approved_at",
            "date",
        ),
        (("audit_provider", "colour = 1\naudit_provider"), "colour", "unknown key(s) colour"),
    ],
)
def test_errors_name_the_file_the_plugin_and_the_field(
    tmp_path: Path, change: tuple[str, str], field: str, expected: str
) -> None:
    path = write(tmp_path / "caplet.lock", VALID.replace(*change))
    with pytest.raises(LockfileError) as info:
        read_lockfile(path)
    message = str(info.value)
    assert message.startswith(f"lock file {path}, plugin 'hello', field {field!r}: ")
    assert expected in message
    assert "re-pin it with `caplet lock hello`" in message
    assert (info.value.plugin, info.value.field) == ("hello", field)


def test_newer_format_and_broken_toml(tmp_path: Path) -> None:
    newer = write(tmp_path / "a.lock", VALID.replace("version = 1\n", "version = 2\n", 1))
    with pytest.raises(LockfileError, match="format version 2, newer than this caplet"):
        read_lockfile(newer)
    broken = write(tmp_path / "b.lock", "version = 1\n[plugins.hello\n")
    with pytest.raises(LockfileError, match=r"b.lock: not valid TOML"):
        read_lockfile(broken)


def test_a_hostile_lock_file_is_a_lockfile_error_not_a_traceback(tmp_path: Path) -> None:
    """Red-team round 3: a lock file (a project checkout's) nested deeply raised
    RecursionError out of every locked host and `caplet verify` (exit 70)."""
    deep = write(tmp_path / "c.lock", "version = 1\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(LockfileError, match=r"c.lock: not a lock file caplet wrote .*nested"):
        read_lockfile(deep)
    dotted = write(tmp_path / "d.lock", "version = 1\n" + ".".join(["p"] * 500) + " = 1\n")
    with pytest.raises(LockfileError, match=r"d.lock: not a lock file caplet wrote .*dots"):
        read_lockfile(dotted)


@pytest.mark.security
def test_a_lock_file_that_is_no_regular_file_never_hangs_caplet(tmp_path: Path) -> None:
    """Red-team round 4: a FIFO named caplet.lock blocked open(2) until a writer came,
    so every locked host (`caplet list`, `call` with CI=true) and `caplet lock`/`verify`
    hung; the policy file had been fixed for the same in round 3, the lock file not."""
    fifo = tmp_path / "caplet.lock"
    os.mkfifo(fifo)
    outcome: list[BaseException | Lockfile] = []

    def read() -> None:
        try:
            outcome.append(read_lockfile(fifo))
        except BaseException as exc:  # the outcome is asserted below
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=60)
    if reader.is_alive():
        # Release the blocked open(2) so that the failing run does not hang the suite.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    [result] = outcome
    assert isinstance(result, LockfileError), result
    assert "caplet.lock: not a regular file" in str(result)
    [problem] = check_lockfile(fifo)
    assert "not a regular file" in problem.message


def test_update_serialises_concurrent_processes(tmp_path: Path) -> None:
    """Eight processes each add one entry at the same time: none is lost."""
    path = tmp_path / "caplet.lock"
    script = textwrap.dedent(
        f"""
        import datetime as dt, sys
        from caplet._audit._model import Verdict
        from caplet._findings import RiskLevel
        from caplet._trust._lockfile import LockEntry, update_lockfile
        from caplet._trust._source import SourceKind
        name = sys.argv[1]
        e = LockEntry(name=name, version="1", source=SourceKind.DIRECTORY,
                      digest="{DIGEST}", capabilities=(), risk_level=RiskLevel.LOW,
                      verdict=Verdict.APPROVE, audit_provider="static-only",
                      approved_at=dt.datetime.now(dt.UTC))
        update_lockfile(__import__("pathlib").Path(sys.argv[2]), lambda lock: lock.with_entry(e))
        """
    )
    names = [f"p{i}" for i in range(8)]
    procs = [subprocess.Popen([sys.executable, "-c", script, name, str(path)]) for name in names]
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    assert read_lockfile(path).names == tuple(names)


def test_update_applies_the_change(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    update_lockfile(path, lambda lock: lock.with_entry(entry("a")).with_entry(entry("b")))
    lock = update_lockfile(path, lambda lock: lock.without("a"))
    assert lock.names == ("b",)
    assert read_lockfile(path).names == ("b",)


# -- doctor --check-state and write failures ------------------------------------------------------


def test_check_lockfile_accepts_a_valid_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    assert check_lockfile(path) == ()
    write_lockfile(Lockfile(path=path, entries=(entry(),)))
    assert check_lockfile(path) == ()


def test_check_lockfile_reports_what_reading_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "caplet.lock"
    path.write_text(render_lockfile(Lockfile(path=path, entries=(entry(),))).replace(DIGEST, "x"))
    (problem,) = check_lockfile(path)
    assert problem.kind is ProblemKind.LOCKFILE
    assert problem.damaged
    assert problem.path == str(path)
    assert f"lock file {path}, plugin 'hello', field 'digest'" in problem.message
    assert "re-pin it with `caplet lock hello`" in problem.message


@pytest.mark.usefixtures("obey_file_permissions")
def test_a_lock_file_that_cannot_be_written_is_a_write_error(tmp_path: Path) -> None:
    directory = tmp_path / "project"
    directory.mkdir()
    path = directory / "caplet.lock"
    write_lockfile(Lockfile(path=path, entries=(entry(),)))
    old = path.read_bytes()
    directory.chmod(0o500)
    try:
        with pytest.raises(LockfileWriteError) as info:
            write_lockfile(Lockfile(path=path, entries=(entry(), entry("other"))))
    finally:
        directory.chmod(0o700)
    assert isinstance(info.value, LockfileError)
    assert info.value.path == str(path)
    message = str(info.value)
    assert f"cannot write the lock file {path}: Permission denied" in message
    assert "check that its directory exists and is writable" in message
    assert "the lock file is unchanged" in message
    assert path.read_bytes() == old


HOLDER = """
import fcntl, os

HELD = []

def create_functions(config):
    def hold():
        # Only fs.read on the project: open(2) of the directory read-only is
        # all flock(2) needs, and neither Landlock nor seccomp mediates it.
        fd = os.open(config["project"], os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_SH)
        HELD.append(fd)  # kept for as long as the worker lives
        return "holding"
    return {"main": {"hold": hold}}
"""


def test_a_plugin_reading_the_project_cannot_hang_lock_file_updates(
    tmp_path: Path, make_plugin: PluginFactory
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    project.chmod(0o755)
    lockfile = project / "caplet.lock"
    make_plugin(
        "holder",
        source=HOLDER,
        modules='[modules.main]\nfunctions = ["hold"]\n',
        extra=(
            'capabilities = ["fs.read:${config.project}"]\n'
            '[config.project]\ntype = "string"\ndescription = "the project"\n'
        ),
    )
    with PluginHost(
        make_plugin.root, state_dir=tmp_path / "state", auditor=None, lockfile=lockfile
    ) as host:
        host.discover()
        assert host.enable("holder", [f"project={project}"], consent=True)
        assert host.call("holder", "main.hold") == "holding"
        before = lockfile.read_bytes() if lockfile.exists() else None
        # Red-team finding 11: this waited for as long as the worker lived. Now the
        # wait is bounded and the error names the holder (a short bound for the test).
        with pytest.raises(LockfileError) as info:
            update_lockfile(lockfile, lambda lock: lock, wait_s=0.5)
        message = str(info.value)
        assert f"its directory {project} has been locked for 0.5 s by pid " in message
        assert "a plugin granted read access to that directory can flock it" in message
        assert "the lock file is unchanged" in message
        assert (lockfile.read_bytes() if lockfile.exists() else None) == before
    # The worker gone, its flock is gone with it: the update goes through.
    update_lockfile(lockfile, lambda lock: lock, wait_s=0.5)
