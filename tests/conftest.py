"""Shared fixtures: isolated HOME/state for every test, and a plugin factory."""

from __future__ import annotations

import contextlib
import os
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from caplet._sandbox._identity import WorkerIdentity
    from caplet._sandbox._launcher import WorkerSpec
    from caplet._sandbox._sandboxed import SandboxLauncher
    from caplet._sandbox._subprocess import SubprocessWorker
    from tests.pgserver import PgServer

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "plugins"

#: The LLM auditor's settings as the suite was started with, for the opt-in
#: ``real_llm`` tests; every other test runs with them unset (static-only
#: unless the test points them at its own 127.0.0.1 server).
REAL_LLM_ENV = {k: v for k, v in os.environ.items() if k.startswith("CAPLET_LLM_")}

#: Proxy settings would send the tests' 127.0.0.1 requests elsewhere.
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


# Property tests are deterministic: each one draws the same examples on every run
# (hypothesis' derandomize: a seed from the test itself), so a red CI run is a bug
# that reproduces, never a draw (a random run found a keyword as a module name once,
# e2a547f). The opt-in long run, CAPLET_FUZZ_EXAMPLES (tests/_fuzz/budget.py),
# explores at random instead; nothing is written to an example database either way.
settings.register_profile(
    "caplet", derandomize=not os.environ.get("CAPLET_FUZZ_EXAMPLES"), database=None
)
settings.load_profile("caplet")


#: CI services export CI=true, which turns locked mode on by default; the
#: suite runs in CI too, so every test (and every module- or session-scoped
#: fixture) starts from the plain defaults, and the tests of locked mode and
#: the allowlist set these themselves.
_LOADING_VARIABLES = (
    "CI",
    "CAPLET_LOCKED",
    "CAPLET_LOCKFILE",
    "CAPLET_LOAD_PLUGINS",
    "CAPLET_DISABLE_PLUGIN_AUTOLOAD",
    "CAPLET_TEST_CRASH_AT",
    "CAPLET_TEST_KILL_AT_WRITE",
    "CAPLET_TEST_WRITE_TRACE",
    # A shared store named in the environment would send every test's state there.
    "CAPLET_STORE",
)


#: The containment tests: kernel isolation, grants, the hostile corpus, the
#: reference plugins' jails. `.ci/run` runs them as root and again as an
#: unprivileged user (`pytest -m security`): a root host's workers take
#: another uid, a user's run as that user, and both must hold.
SECURITY_TESTS = (
    "tests/_sandbox/",
    "tests/_selftest/",
    "tests/plugins/",
    "tests/_host/test_grant_check.py",
    "tests/_host/test_program_reach.py",
    "tests/_host/test_peer_code.py",
    "tests/_host/test_run_dir.py",
    "tests/_host/test_meeting.py",
    "tests/_host/test_host_state.py",
    "tests/_host/test_guest.py",
    "tests/_host/test_context_hostile.py",
    "tests/_host/test_context_fuzz.py",
    "tests/_host/test_context_http.py",
    "tests/_host/test_enable_race.py",
    "tests/_host/test_red_team.py",
    "tests/_host/test_host_errors.py",
    "tests/_host/test_decision_log.py",
    "tests/_host/test_guest_requests.py",
    "tests/_host/test_guest_catalog.py",
    "tests/_host/test_update.py",
    "tests/_host/test_journal.py",
    "tests/_broker/test_http_malformed.py",
    "tests/_broker/test_http_fuzz.py",
    "tests/_mcp/",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    security = pytest.mark.security
    for item in items:
        relative = Path(str(item.path)).relative_to(REPO).as_posix()
        if relative.startswith(SECURITY_TESTS):
            item.add_marker(security)


@pytest.fixture(autouse=True, scope="session")
def _no_loading_variables_for_the_session() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name in _LOADING_VARIABLES:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test may touch the real home directory or the user's caplet state."""
    home = tmp_path_factory.mktemp("home")
    # Where the hosts of one test meet whatever their HOME (caplet._host._meeting), and
    # no other test's: /tmp/caplet-<uid> is every test run's of this user.
    monkeypatch.setenv("CAPLET_TEST_PEER_BASES", str(tmp_path_factory.mktemp("peers")))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CAPLET_STATE_DIR", raising=False)
    monkeypatch.delenv("CAPLET_PLUGINS_DIR", raising=False)
    monkeypatch.delenv("CAPLET_POLICY", raising=False)
    for name in (*REAL_LLM_ENV, *_PROXY_VARS, *_LOADING_VARIABLES):
        monkeypatch.delenv(name, raising=False)


#: A ``logging.config.fileConfig`` INI whose handler ``args`` run code (attack26): the code
#: is in a data file the plugin ships, evaluated by the standard library.
FILECONFIG_PAYLOAD = """\
[loggers]
keys=root
[handlers]
keys=h
[formatters]
keys=
[logger_root]
handlers=h
[handler_h]
class=StreamHandler
args=(__import__('ctypes').sizeof(__import__('ctypes').c_int) and __import__('sys').stderr,)
"""


def write_policy(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """Write a policy file beside a plugins directory and allow it, as a person does with
    ``caplet policy --allow`` after reading it (a found file that loosens applies only
    then: caplet._host._policy_allow)."""
    from caplet._host._policy_allow import allow_policy_text

    path.write_text(text, encoding=encoding)
    allow_policy_text(path, text)
    return path


def rooted(kind: str) -> str:
    """Manifest lines granting ``kind`` (``fs.read``, ``fs.write``) over the folder the
    plugin's ``root`` setting names, for ``PluginFactory``'s ``extra``."""
    return f'capabilities = ["{kind}:${{config.root}}"]\n[config.root]\ntype = "string"\n'


@dataclass
class PluginFactory:
    """Writes plugin folders into ``root``; each call returns the plugin directory."""

    root: Path

    def __call__(
        self,
        name: str,
        *,
        source: str | None = None,
        manifest: str | None = None,
        modules: str = '[modules.main]\nfunctions = ["run"]\n',
        extra: str = "",
        files: dict[str, str] | None = None,
    ) -> Path:
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        if manifest is None:
            manifest = (
                f'name = "{name}"\nversion = "1.0.0"\ndescription = "Test plugin {name}."\n'
                f"{extra}\n{modules}"
            )
        (directory / "plugin.toml").write_text(textwrap.dedent(manifest), encoding="utf-8")
        if source is None:
            source = """
                def create_functions(config):
                    def run(*args, **kwargs):
                        return {"args": list(args), "config": dict(config)}
                    return {"main": {"run": run}}
            """
        (directory / "plugin.py").write_text(textwrap.dedent(source), encoding="utf-8")
        for relative, text in (files or {}).items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return directory


@pytest.fixture
def plugins_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plugins"
    path.mkdir()
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One real PostgreSQL server for the session (tests/pgserver.py), on a private socket."""
    from tests.pgserver import running_server

    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a fresh, empty database of its own on the session's server."""
    return pg_server.new_database()


@pytest.fixture(scope="session")
def dask_scheduler() -> Iterator[str]:
    """A real Dask LocalCluster on 127.0.0.1 (two worker processes); its scheduler's address."""
    from distributed import LocalCluster

    with LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        # The scheduler serves HTTP routes even without a dashboard, on
        # dashboard_address or else its default 8787 (distributed/node.py,
        # start_http_server): a fixed port two test runs clash on, which warns
        # (an error here). A free port of the loopback instead.
        dashboard_address="127.0.0.1:0",
    ) as cluster:
        yield cluster.scheduler_address


class DelegatingLauncher:
    """A test's view of the module's launcher: workers start through it, and closing
    the host closes nothing (the module's fixture owns the zygote). Subclasses
    record or watch what they start."""

    def __init__(self, inner: SandboxLauncher) -> None:
        self.inner = inner

    @property
    def isolation(self) -> str:
        return self.inner.isolation

    @property
    def copies_snapshot(self) -> bool:
        return self.inner.copies_snapshot

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        return self.inner.start(spec)

    def close(self) -> None:
        """The module's fixture closes the real one."""


@pytest.fixture(scope="module")
def launcher() -> Iterator[SandboxLauncher]:
    """One strict sandbox launcher (and so one zygote) per test module that asks for it:
    starting a zygote per test would dominate the host and sandbox tests' time."""
    from caplet._sandbox._sandboxed import SandboxLauncher

    sandbox = SandboxLauncher(strict=True)
    yield sandbox
    sandbox.close()


@pytest.fixture
def make_plugin(plugins_dir: Path) -> PluginFactory:
    return PluginFactory(plugins_dir)


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    """A private copy of the bundled examples (tests never modify the repo)."""
    import shutil

    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def obey_file_permissions() -> Iterator[None]:
    """Make permission tests meaningful when the suite runs as root (as CI does).

    Root bypasses file mode bits through CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
    and CAP_FOWNER (capabilities(7)); clearing them from this thread's
    effective set for the duration of one test makes the kernel check the
    bits as it would for an ordinary owner, instead of skipping the test.
    """
    from caplet._syscall import (
        CAP_DAC_OVERRIDE,
        CAP_DAC_READ_SEARCH,
        CAP_FOWNER,
        drop_effective_capabilities,
        effective_capabilities,
        raise_effective_capabilities,
    )

    held = effective_capabilities() & {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}
    drop_effective_capabilities(held)
    try:
        yield
    finally:
        raise_effective_capabilities(held)


PLUGIN_SOURCE = """
def create_functions(config):
    def run(*args, **kwargs):
        return {"args": list(args), "config": dict(config)}
    return {"main": {"run": run}}
"""


def distribution_files(
    name: str = "hello",
    *,
    dist: str = "acme-plugins",
    version: str = "1.2.0",
    entry_point: str | None = None,
    plugin_version: str = "1.0.0",
    source: str = PLUGIN_SOURCE,
    extra: str = "",
) -> dict[str, str]:
    """The files of a tiny distribution shipping plugin *name*, by archive path.

    Its package's ``__init__.py`` records being imported (in the file named
    by ``CAPLET_TEST_IMPORT_MARKER``): discovery must never import it.
    """
    package = dist.replace("-", "_")
    info = f"{package}-{version}.dist-info"
    folder = f"{package}/{name}"
    return {
        f"{package}/__init__.py": (
            "import os\n"
            "open(os.environ.get('CAPLET_TEST_IMPORT_MARKER', '/dev/null'), 'a').write('x')\n"
        ),
        f"{folder}/plugin.toml": (
            f'name = "{name}"\nversion = "{plugin_version}"\n'
            f'description = "Installed plugin {name}."\n{extra}\n'
            '[modules.main]\nfunctions = ["run"]\n'
        ),
        f"{folder}/plugin.py": textwrap.dedent(source),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
        f"{info}/entry_points.txt": (
            f"[caplet.plugins]\n{name} = {entry_point or f'{package}:{name}'}\n"
        ),
        # RECORD lies on purpose: the digest must come from the files on disk.
        f"{info}/RECORD": f"{folder}/plugin.py,sha256=AAAA,1\n",
    }


def make_distribution(site: Path, name: str = "hello", **options: Any) -> Path:
    """Install :func:`distribution_files` into the folder *site*; returns the plugin folder."""
    files = distribution_files(name, **options)
    for relative, text in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    package = str(options.get("dist", "acme-plugins")).replace("-", "_")
    return site / package / name


def make_wheel(path: Path, name: str = "hello", **options: Any) -> Path:
    """A ``.whl`` (a zip archive) holding :func:`distribution_files`."""
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for relative, text in distribution_files(name, **options).items():
            archive.writestr(relative, text)
    return path


def child_pids(pid: int) -> list[int]:
    """The live children of ``pid``, read from /proc (a jail monitor's child is its pid 1)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry))
    return found


def give_to_worker(*paths: Path) -> None:
    """Make ``paths`` (and everything below them) the workers' own, as an administrator would.

    caplet never runs a worker as root: on a root host it runs as an
    unprivileged uid (caplet._sandbox._identity), so a writable grant must
    belong to that uid (docs/security.md, "Who a worker is"). On a host that
    is not root the worker is the host's own user and nothing changes.
    """
    from caplet._sandbox._identity import worker_identity

    identity = worker_identity()
    if not identity.privileged:
        return
    for path in paths:
        for item in [path, *path.rglob("*")]:
            os.chown(item, identity.uid, identity.gid, follow_symlinks=False)


def own_identity() -> WorkerIdentity:
    """The test process's own ids as a worker identity (a test-only seam).

    For the plain-process launcher's *protocol* tests: as root in CI the
    interpreter lives under /root, which the unprivileged uid a root host's
    workers take cannot execute. What a root host really does with plain
    workers is tested on its own (tests/_sandbox/test_subprocess.py).
    """
    from caplet._sandbox._identity import WorkerIdentity

    uid, gid = os.geteuid(), os.getegid()
    return WorkerIdentity(uid, gid, privileged=False, source="the test process's own ids")


#: Whether the suite runs as root. CI runs the security tests both ways
#: (.ci/run): as root every isolation layer is here, the optional cgroups
#: included; an unprivileged user has it only where a cgroup was delegated to
#: it, so tests of the cgroup itself need root there.
ROOT = os.geteuid() == 0
NEEDS_CGROUP = pytest.mark.skipif(
    not ROOT, reason="the cgroup layer (pids and memory cgroups) needs root (or a delegated cgroup)"
)


@contextlib.contextmanager
def fifo_released(fifo: Path) -> Iterator[None]:
    """A guard, never a measure: on code that opens ``fifo`` for reading and waits for
    a writer, writers come after 20 s, once a second until the block ends (so the
    test fails instead of hanging); on code that never waits, the block ends first
    and nothing is written."""
    done = threading.Event()

    def release() -> None:
        if done.wait(20):
            return
        while not done.wait(1):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
