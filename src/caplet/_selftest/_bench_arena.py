"""The bench's arena: the throw-away world every selftest case is attacked in.

:class:`BenchArena` builds it once per run: a temporary root with a state
directory, a lock file, decoy files, a decoy "host" process, listeners on
127.0.0.1, an abstract and a pathname unix socket, two HTTP servers, the
host's secret in its environment, every case's plugin, and the hosts (the
red team's with the static gate off, a gated one, the auditors' hosts) on
one sandbox launcher. Apart from :mod:`._bench`, which runs the cases in
it and proves containment after each.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path

from caplet._broker._policy import NetworkPolicy
from caplet._broker._static_resolver import StaticResolver
from caplet._errors import (
    SelftestError,
)
from caplet._host._apps import AppCall
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules
from caplet._host._policy import Isolation, Policy
from caplet._sandbox._identity import hand_over, worker_identity
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._seccomp import SYSCALL_NUMBERS
from caplet._selftest._fixtures import (
    HttpServer,
    LogCounter,
    QuietArena,
    fill_arena,
    plugin_manifest,
    plugin_source,
)
from caplet._selftest._gullible import GullibleAuditor
from caplet._selftest._introspection import (
    APP_CAPABILITY,
    LOADER_SECRET_ENV,
    SECRET_ENV,
    SECRET_PREFIX,
)
from caplet._selftest._jails import (
    digest_tree,
)
from caplet._selftest._model import Arena, HostileCase, Scenario
from caplet._selftest._network import REBINDING_NAME
from caplet._trust._lockfile import update_lockfile

__all__ = ["BenchArena"]
#: The address the bench's policy allows: a stand-in for an intranet server.
_INTRANET = "127.0.0.2"
_CANARY_PLUGIN = "selftest-canary"
#: Where an attack that escaped its private /tmp would leave files (the
#: plugins write to the literal /tmp; Python's idea of it may differ).
_HOST_TMP_DIRS = (Path(tempfile.gettempdir()), Path("/tmp"))  # noqa: S108
_CANARY_SOURCE = """
def create_functions(config):
    def run():
        return "still serving"
    return {"main": {"run": run}}
"""


@dataclass
class BenchArena:
    """The arena and its hosts, built by :meth:`_build` (see the module docstring)."""

    cases: Sequence[HostileCase]
    root: Path | None = None
    arena: Arena = field(init=False)
    #: The red team's host: the static gate off (kernel layers alone).
    host: PluginHost = field(init=False)
    #: An ordinary host on the same arena: every layer on.
    gated: PluginHost = field(init=False)
    launcher: SandboxLauncher = field(init=False)
    policy: Policy = field(init=False)
    layers: dict[str, str] = field(init=False)
    _stack: ExitStack = field(init=False)
    _listeners: tuple[socket.socket, ...] = field(init=False)
    _fifo_fd: int = field(init=False)
    _log_counter: LogCounter = field(init=False)
    _sources: dict[str, str] = field(init=False)
    _audit_hosts: dict[Scenario, PluginHost] = field(init=False)
    _scrub: dict[str, str] = field(init=False)

    # -- the arena --------------------------------------------------------------------

    def _build(self) -> None:
        stack = self._stack
        if self.root is None:
            root = Path(tempfile.mkdtemp(prefix="caplet-selftest-"))
            stack.callback(shutil.rmtree, root, ignore_errors=True)
        else:
            root = self.root
            root.mkdir(parents=True, exist_ok=True)
        token = f"caplet-selftest-{uuid.uuid4().hex[:12]}"
        secret = f"{SECRET_PREFIX}{uuid.uuid4().hex}"
        stack.callback(self._clean_host_tmp, token)
        self._set_env(SECRET_ENV, secret)
        self._set_env(LOADER_SECRET_ENV, secret)

        tcp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        udp.bind(("127.0.0.1", 0))
        abstract = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        abstract.bind("\0" + token)
        abstract.listen()
        unix_path = root / "run" / "service.sock"
        unix_path.parent.mkdir(parents=True)
        unix = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        unix.bind(str(unix_path))
        unix.listen()
        unix_dgram_path = unix_path.with_name("log.sock")
        unix_dgram = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
        unix_dgram.bind(str(unix_dgram_path))
        fifo_path = unix_path.with_name("service.fifo")
        os.mkfifo(fifo_path, 0o666)
        # A host process reading the FIFO: held open so a writer's open succeeds.
        fifo_fd = os.open(fifo_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        stack.callback(os.close, fifo_fd)
        self._fifo_fd = fifo_fd
        for path in (unix_path, unix_dgram_path, fifo_path, unix_path.parent):
            path.chmod(0o777 if path != unix_path.parent else 0o755)  # reachable by any uid
        self._listeners = (tcp, udp, abstract, unix, unix_dgram)
        for sock in self._listeners:
            sock.setblocking(False)
        loopback = self._serve("127.0.0.1")
        intranet = self._serve(_INTRANET)

        decoy = subprocess.Popen(
            [sys.executable, "-I", "-c", "import time; time.sleep(86400)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack.callback(self._stop_decoy, decoy)

        outside = root / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text(f"the host's secret: {secret}\n", encoding="utf-8")
        secret_fd = os.open(outside / "secret.txt", os.O_RDONLY | os.O_CLOEXEC)
        stack.callback(os.close, secret_fd)
        links = root / "links"
        links.mkdir()
        (links / "outside").symlink_to(outside)
        # A program reached through a link that lies in a writable grant
        # (links/program -> grants/program-hop -> true): case program-through-link.
        (root / "grants").mkdir()
        (root / "grants" / "program-hop").symlink_to(shutil.which("true") or "/bin/true")
        (links / "program").symlink_to(root / "grants" / "program-hop")
        home = root / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("a private key\n", encoding="utf-8")

        counter = self._log_counter = LogCounter()
        plugin_logger = logging.getLogger("caplet.plugins")
        plugin_logger.addHandler(counter)
        stack.callback(plugin_logger.removeHandler, counter)
        quiet = QuietArena(root)
        for name in ("caplet",):
            logging.getLogger(name).addFilter(quiet)
            stack.callback(logging.getLogger(name).removeFilter, quiet)

        self.arena = Arena(
            root=root,
            host_pid=os.getpid(),
            decoy_pid=decoy.pid,
            state_dir=root / "state",
            plugins_dir=root / "plugins",
            lockfile=root / "caplet.lock",
            grants_dir=root / "grants",
            outside=outside,
            home=home,
            tcp_port=tcp.getsockname()[1],
            udp_port=udp.getsockname()[1],
            abstract_name=token,
            unix_path=unix_path,
            unix_dgram_path=unix_dgram_path,
            fifo_path=fifo_path,
            links_dir=links,
            http_port=loopback.port,
            intranet_port=intranet.port,
            token=token,
            secret=secret,
            secret_fd=secret_fd,
            syscalls=SYSCALL_NUMBERS.get(os.uname().machine, {}),
            loopback_hits=lambda: tuple(loopback.hits),
            intranet_hits=lambda: tuple(intranet.hits),
            plugin_log_lines=lambda plugin: counter.counts.get(plugin, 0),
        )
        shm = self.arena.shm_file
        if shm.parent.is_dir():
            shm.write_text(f"{secret}\n", encoding="utf-8")
            stack.callback(shm.unlink, missing_ok=True)
        self._scrub = {
            str(root): "ARENA",
            token: "TOKEN",
            secret: "SECRET",
            f":{loopback.port}": ":PORT",
            f":{intranet.port}": ":PORT",
        }
        update_lockfile(self.arena.lockfile, lambda lock: lock)
        self._write_plugins()
        self._hostile_tmpdir()
        self._start_host()

    def _hostile_tmpdir(self) -> None:
        """Run the hosts with ``TMPDIR`` inside the grants every case can write.

        The red team's setting (issue 13, finding 4): snapshots and anything
        else the host made under ``tempfile.gettempdir()`` were then within a
        plugin's reach. Every case now runs so, and ``snapshot-hunt`` walks the
        grants for any snapshot or plugin code it could change.
        """
        before = tempfile.tempdir
        self._set_env("TMPDIR", str(self.arena.grants_dir))
        tempfile.tempdir = None  # gettempdir() caches its first answer

        def restore() -> None:
            tempfile.tempdir = before

        self._stack.callback(restore)

    def _set_env(self, name: str, value: str) -> None:
        before = os.environ.get(name)
        os.environ[name] = value

        def restore() -> None:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before

        self._stack.callback(restore)

    def _serve(self, address: str) -> HttpServer:
        try:
            server = HttpServer(address)
        except OSError as exc:
            raise SelftestError(
                f"cannot start the selftest's HTTP server on {address}: {exc}; the SSRF cases "
                "need the loopback addresses 127.0.0.1 and 127.0.0.2"
            ) from exc
        thread = threading.Thread(target=server.serve_forever, name=f"selftest-{address}")
        thread.daemon = True
        thread.start()
        self._stack.callback(server.server_close)
        self._stack.callback(server.shutdown)
        return server

    @staticmethod
    def _stop_decoy(decoy: subprocess.Popen[bytes]) -> None:
        with suppress(ProcessLookupError):
            decoy.send_signal(signal.SIGKILL)
        decoy.wait()

    @staticmethod
    def _clean_host_tmp(token: str) -> None:
        for folder in _HOST_TMP_DIRS:
            for path in folder.glob(f"{token}-*"):
                path.unlink(missing_ok=True)

    def _write_plugins(self) -> None:
        arena = self.arena
        canary = arena.plugins_dir / _CANARY_PLUGIN
        canary.mkdir(parents=True)
        (canary / "plugin.toml").write_text(
            f'name = "{_CANARY_PLUGIN}"\nversion = "1.0.0"\n'
            'description = "Answers while the attacks run."\n\n'
            '[modules.main]\nfunctions = ["run"]\n',
            encoding="utf-8",
        )
        (canary / "plugin.py").write_text(textwrap.dedent(_CANARY_SOURCE), encoding="utf-8")
        for case in self.cases:
            folder = arena.plugins_dir / case.name
            folder.mkdir()
            arena.out(case.name).mkdir(parents=True)
            hand_over(arena.grants_dir, worker_identity())  # snapshot-hunt writes all of it
            # A writable grant: the worker's own, as an administrator makes it.
            hand_over(arena.out(case.name), worker_identity())
            (folder / "plugin.toml").write_text(plugin_manifest(case, arena), encoding="utf-8")
            (folder / "plugin.py").write_text(plugin_source(case.body), encoding="utf-8")
            for relative, text in case.files:
                path = folder / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(fill_arena(text, arena), encoding="utf-8")
            for relative, target in case.symlinks:
                (folder / relative).symlink_to(target)
        self._sources = digest_tree(arena.plugins_dir)

    def _start_host(self) -> None:
        self.policy = Policy(
            isolation=Isolation.BEST_EFFORT,
            network=NetworkPolicy(allowed_networks=(ipaddress.ip_network(f"{_INTRANET}/32"),)),
        )
        self.launcher = SandboxLauncher(strict=False)
        self._stack.callback(self.launcher.close)
        self.layers = dict(self.launcher.layers())
        # Two hosts on one arena: the red team's, with the static gate off
        # (the public switch, issue 13: the kernel layers measured alone, no
        # audit faked), and an ordinary one with every layer on.
        self.host = self._host(red_team=True)
        self.gated = self._host(state_dir=self.arena.root / "state-gated")
        self._audit_hosts = {}
        for host in (self.host, self.gated):
            host.register_capability(APP_CAPABILITY, self._vault)
            # Consent (issue 14) is the operator's: running `caplet selftest` is
            # asking for these plugins to run, so the bench consents for them.
            outcome = host.enable(_CANARY_PLUGIN, consent=True)
            if not outcome:
                raise SelftestError(
                    f"the selftest's own harmless plugin does not start here: {outcome.reason}"
                )

    def _host(
        self,
        *,
        state_dir: Path | None = None,
        auditor: GullibleAuditor | None = None,
        loading: LoadingRules | None = None,
        red_team: bool = False,
    ) -> PluginHost:
        arena = self.arena
        host = PluginHost(
            arena.plugins_dir,
            state_dir=state_dir or arena.state_dir,
            policy=self.policy,
            launcher=self.launcher,
            auditor=auditor,
            lockfile=arena.lockfile,
            loading=loading or LoadingRules(),
            dist_path=(),
            resolver=StaticResolver(
                {"localhost": ["127.0.0.1"], REBINDING_NAME: [_INTRANET, "127.0.0.1"]}
            ),
            red_team=red_team,
        )
        self._stack.callback(host.close)
        return host

    def _vault(self, call: AppCall) -> object:
        """An application handler that fails with the host's secret in its message."""
        del call
        raise RuntimeError(f"the vault's password is {self.arena.secret}")
