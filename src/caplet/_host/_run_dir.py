"""The host's run directory: snapshots and work directories, where no grant reaches.

Issue 13, point 4. Snapshots used to live under ``tempfile.gettempdir()``;
with ``TMPDIR`` inside some plugin's ``fs.write`` grant, that plugin
rewrote a module another plugin imported. They now live in
``<state dir>/run/caplet-run-*``: enable refuses any grant inside the state
directory and any writable grant containing it, and a read grant containing
it gets it hidden (:mod:`caplet._host._grant_check`), so no worker can reach
a snapshot by any path. The directory is private (0700) and its snapshots
read-only; a worker of a root host runs as another uid and could not change
them even if it could reach them.

A host killed with SIGKILL cannot remove its run directory. Each one holds
an ``flock(2)`` on a lock file beside it (``caplet-run-XXXX.lock``, made
and locked before the directory exists) for as long as the host lives, so
the next host removes every run directory whose lock it can take: the lock
is released by the kernel when its holder dies, whatever its pid is reused
for, and a directory whose host is still starting is never taken for litter.

The same lock tells a host which *other* hosts on the state directory are
alive, and each host publishes, in its run directory, the writable grants
and the programs of the plugins it has enabled (``grants.json``): enable
checks a plugin's programs and writable grants against every live host's,
not only its own (red team, round 4: a plugin enabled by a long-running
``caplet mcp`` wrote ``/data``, and a ``caplet call`` of another process
enabled a plugin approved to run ``/data/tool``). Each also publishes the
folders it runs Python code from (``code.json``: its ``sys.path``, its
runtime, its plugins), which no other host may grant writable (red team
round 19: ``caplet mcp`` granted ``fs.write`` over the folder a
``PYTHONPATH=... python app.py`` of the same user imported from).

Peers are every caplet process of the user, not only those on this state
directory: a host whose state directory is another (``CAPLET_STATE_DIR`` per
project, an application's ``state_dir=``) also keeps a *beacon* in the user's
platform state directory's ``run`` folder (:func:`user_state_dir`, the same
for every state directory): a locked lock file and a folder holding the same
``grants.json`` and ``code.json``, and no snapshot. Every host reads the
peers of its own ``run`` folder and of that one (attack22: a process with a
state directory of its own imported a module a plugin of the default state
directory's host wrote into its ``PYTHONPATH`` folder). A host that cannot
make its beacon (a read-only home) was seen only by the hosts of its own state
directory.

That folder depends on ``HOME``: a host run with another one met nobody there
(attack24). Every host now also keeps a beacon in each of the user's *meeting
folders* (:mod:`caplet._host._meeting`: ``caplet-<uid>`` in ``/run/user/<uid>``
and in ``/tmp``, named by the uid alone, checked through their descriptors), and
reads the peers of those too. A host with a beacon in none is seen by no host of
another home or state directory: :attr:`RunDir.unseen` says why, and its enables
that others would have to know about are refused.

A host publishes in one meeting folder a base, but another host may have taken
another of the user's (attack28: a name planted and removed while two hosts start).
So each host reads the peers of *every* folder of the user's own among the meeting
names, looked at again at each read, and takes the publication lock of every one of
them as well as of its own folders: two enables in two hosts always share a lock
(whichever of the two looked later sees the other's folder, made before that host's
first enable), and the one that holds it second reads the peers again under it,
after the first published. A meeting folder that cannot be checked refuses those
enables (:meth:`RunDir.meeting_problem`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from caplet._atomic import exclusive_lock
from caplet._errors import StoreError
from caplet._host._grant_check import GrantPlan
from caplet._host._meeting import (
    Meeting,
    MeetingPlaces,
    meeting_bases,
    meeting_places,
    open_meetings,
)
from caplet._host._peer_files import read_code, read_plans
from caplet._host._run_locks import (
    LOCK,
    PREFIX,
    alive,
    entry_identity,
    locked_lock_file,
    make_beacon,
    sweep,
)
from caplet._trust._paths import ensure_private_dir, user_state_dir
from caplet._trust._snapshot import remove_snapshot

__all__ = ["RUN_SUBDIR", "RunDir", "unchecked_warning", "unseen_warning"]

#: The state directory's subdirectory holding every host's run directory.
RUN_SUBDIR = "run"
#: The enabled plugins' writable grants and programs, published for the other hosts.
_GRANTS = "grants.json"
#: Held (flock) by a host while it checks against its peers and publishes.
_PUBLISH_LOCK = ".grants.flock"
#: The folders a host runs code from (its sys.path, runtime, plugins), for the others.
_CODE = "code.json"


class RunDir:
    """One host's private run directory under ``<state dir>/run``; removed by :meth:`close`."""

    __slots__ = (
        "_bases",
        "_beacons",
        "_code",
        "_held",
        "_lock",
        "_lock_fd",
        "_meetings",
        "_unseen",
        "path",
    )

    def __init__(self, state_dir: Path) -> None:
        try:
            parent = ensure_private_dir(ensure_private_dir(state_dir) / RUN_SUBDIR)
            sweep(parent)
            self._lock_fd, lock = locked_lock_file(parent)
        except OSError as exc:
            raise StoreError(
                f"cannot create caplet's run directory under {state_dir / RUN_SUBDIR} "
                f"({exc.strerror}); check that the state directory is writable"
            ) from exc
        self._lock = Path(lock)
        self._code: tuple[tuple[Path, bool], ...] | None = None
        #: While the publication lock is held: the thread holding it, and where the
        #: meeting places read under it are kept open (looked at once, after the lock
        #: was taken; :meth:`_places`).
        self._held: tuple[int, ExitStack, list[MeetingPlaces]] | None = None
        self.path = self._lock.with_name(self._lock.name[: -len(LOCK)])
        try:
            self.path.mkdir(mode=0o700)
        except OSError as exc:
            os.close(self._lock_fd)
            self._lock.unlink(missing_ok=True)
            raise StoreError(
                f"cannot create caplet's run directory {self.path} ({exc.strerror}); check "
                "that the state directory is writable"
            ) from exc
        self._beacons: list[tuple[Path, int]] = []
        platform = _platform_beacon(parent)
        if platform is not None:
            self._beacons.append(platform)
        # The host's bases for its life: CAPLET_TEST_PEER_BASES changed after it started
        # would make its own meeting folder look gone (the selftest's module-wide hosts).
        self._bases = meeting_bases()
        self._meetings = open_meetings(self._bases)
        self._unseen = self._meet()

    def _meet(self) -> str:
        """A beacon in each meeting folder; why the host is unseen when in none ("" when
        it has one)."""
        reasons = []
        for meeting in self._meetings:
            if meeting.fd < 0:
                if meeting.refusal:
                    reasons.append(meeting.refusal)
                continue
            try:
                self._beacons.append(make_beacon(meeting.path))
            except OSError as exc:
                reasons.append(f"no beacon could be made in {meeting.name} ({exc.strerror})")
        if len(self._meetings_used()) == 0:
            tried = ", ".join(str(m.name) for m in self._meetings)
            return "; ".join(reasons) or f"none of {tried} exists"
        return ""

    def _meetings_used(self) -> list[Meeting]:
        parents = {beacon.parent for beacon, _ in self._beacons}
        return [m for m in self._meetings if m.fd >= 0 and m.path in parents]

    @property
    def unseen(self) -> str:
        """Why the caplet processes of this user with another home or state directory do
        not see this one (no beacon in any meeting folder); "" when they do."""
        return self._unseen

    @property
    def meeting_folders(self) -> tuple[Path, ...]:
        """Every meeting folder's name, the refused and passed-over ones too (guarded like
        caplet's state: a plugin writing in one could hide a host from its peers; one
        granted a refused folder of the user's, mode 0777, could ``chmod 700`` it, which
        Landlock does not govern, and plant what the next host reads there)."""
        with self._places() as places:
            present = places.present
        return tuple(
            dict.fromkeys(
                (
                    *(
                        path
                        for m in self._meetings
                        for path in (m.name, *(p for p, _ in m.passed_over))
                    ),
                    *present,  # any other name there now: another host may meet in it
                )
            )
        )

    def meeting_problem(self) -> str:
        """Why the peers this host would meet cannot all be checked now ("" when they
        can): a meeting folder of the user's that cannot be looked into or that others
        may write, or this host's own meeting folder no longer a private folder of the
        user's at its name (its peers would not find this host there)."""
        with self._places() as places:
            return _problem(places, self._meetings_used())

    @property
    def meeting_notes(self) -> tuple[str, ...]:
        """A sentence for each meeting folder used in place of ``caplet-<uid>``, which
        something else holds: the user should have it removed."""
        return tuple(
            f"{m.passed_over[0][0]} {m.passed_over[0][1]}; the caplet processes of this "
            f"user meet in {m.name} instead"
            for m in self._meetings
            if m.fd >= 0 and m.passed_over
        )

    def publish(
        self,
        plans: Mapping[str, GrantPlan],
        check: Callable[[Mapping[str, GrantPlan]], None] | None = None,
    ) -> None:
        """Tell the other hosts on this state directory what the enabled plugins may
        write and run (atomically replaced; ephemeral, so not fsynced).

        ``check`` is called first with the live peers' plans, and the two steps
        hold one lock shared by every host on the state directory: two enables in
        two processes are judged one after the other, each seeing what the other
        published (its exception, CapabilityError, propagates and nothing is
        published). StoreError when the file cannot be written.
        """
        try:
            with self._publish_lock():
                if check is not None:
                    problem = self.meeting_problem()
                    if problem:
                        raise StoreError(unchecked_warning(problem))
                    check(self.peer_plans())
                self._write(plans)
        except OSError as exc:
            raise StoreError(
                f"cannot publish the enabled plugins' grants in {self.path} ({exc.strerror}); "
                "check that the state directory is writable"
            ) from exc

    @contextmanager
    def _publish_lock(self) -> Iterator[None]:
        """The publication lock of every folder this host publishes in and of every
        meeting folder of the user's (module docstring), taken in the order of the
        folders' inodes: the same order in every host, whichever of them it shares (no
        two hosts wait for each other's second lock). A meeting folder is locked through
        the descriptor it was checked by."""
        with meeting_places(self._bases) as places, ExitStack() as stack:
            folders = (*(folder.parent for folder in self._folders()), *_paths(places))
            for parent in _by_identity(folders):
                stack.enter_context(exclusive_lock(parent / _PUBLISH_LOCK))
            self._held = (threading.get_ident(), stack, [])
            try:
                yield
            finally:
                self._held = None

    @contextmanager
    def _places(self) -> Iterator[MeetingPlaces]:
        """The meeting places to read the peers from. Under the publication lock, looked
        at once it is held, not before: a host that published while this one waited
        for it may meet in a folder made since this one looked (the lock it shares
        with that host is another's); kept until the lock is released."""
        if self._held is None or self._held[0] != threading.get_ident():
            # Not under the lock (another thread's places are closed when it ends).
            with meeting_places(self._bases) as places:
                yield places
            return
        _, stack, held = self._held
        if not held:
            held.append(stack.enter_context(meeting_places(self._bases)))
        yield held[0]

    def _folders(self) -> tuple[Path, ...]:
        """Where this host publishes: its run directory, then its beacons."""
        return (self.path, *(beacon for beacon, _ in self._beacons))

    def _write(self, plans: Mapping[str, GrantPlan]) -> None:
        data = {
            name: {
                "writable": [[g.path, g.device, g.inode] for g in plan.grants if g.writable],
                "programs": [g.path for g in plan.programs],
            }
            for name, plan in plans.items()
            if plan.programs or any(g.writable for g in plan.grants)
        }
        for folder in self._folders():
            _replace(folder / _GRANTS, json.dumps(data))

    def publish_code(
        self,
        folders: Sequence[tuple[Path, bool]],
        check: Callable[[Mapping[str, GrantPlan]], None] | None = None,
    ) -> None:
        """Tell the other hosts the folders this one runs Python code from (its
        ``sys.path``, its runtime, its plugins), each with whether a grant inside it is
        refused too: a writable grant another process gives over one of them runs a
        plugin's module here (red team round 19). Written again only when they changed
        (an enable publishes them). StoreError when it cannot be written.

        ``check`` is then called with the live peers' plans, under the lock
        :meth:`publish` holds: a peer's enable is judged wholly before or wholly after
        (attack21: one that planned before these folders were published and published
        its grants after they were checked was seen by neither side).
        """
        try:
            with self._publish_lock():
                if tuple(folders) != self._code:
                    self._write_code(folders)
                if check is not None:
                    check(self.peer_plans())
        except OSError as exc:
            raise StoreError(
                f"cannot publish the folders this process imports from in {self.path} "
                f"({exc.strerror}); check that the state directory is writable"
            ) from exc

    def _write_code(self, folders: Sequence[tuple[Path, bool]]) -> None:
        text = json.dumps([[str(path), inside] for path, inside in folders])
        for folder in self._folders():
            _replace(folder / _CODE, text)
        self._code = tuple(folders)

    def peer_code(self) -> tuple[tuple[Path, bool], ...]:
        """The folders the *other* live hosts run code from (:meth:`publish_code`)."""
        found: dict[Path, bool] = {}
        with self._places() as places:
            for directory in self._peers(places):
                for path, inside in read_code(directory / _CODE):
                    found[path] = found.get(path, False) or inside
        return tuple(found.items())

    def _peers(self, places: MeetingPlaces) -> list[Path]:
        """The run directories and beacons of the *other* live hosts (each holds its
        lock, a file of this user's), in this state directory's ``run`` folder, the
        user's, and every meeting folder of the user's (``places``, open meanwhile)."""
        # Ours by the lock files' inodes, not their paths: a state directory named
        # through a link (or relative) spells the user's run folder otherwise.
        ours = {_identity(fd) for fd in (self._lock_fd, *(fd for _, fd in self._beacons))}
        shared = _shared_run()
        parents = _by_identity(
            (
                self.path.parent,
                *((shared,) if shared is not None else ()),
                *(m.path for m in self._meetings if m.fd >= 0),
                *(f.parent for f in self._folders()),
                *_paths(places),
            ),
            missing_too=False,
        )
        found: list[Path] = []
        for parent in parents:
            try:
                locks = [entry for entry in os.scandir(parent) if entry.name.endswith(LOCK)]
            except OSError:
                continue
            found += [
                Path(entry.path[: -len(LOCK)])
                for entry in locks
                if entry.name.startswith(PREFIX)
                and entry_identity(entry) not in (None, *ours)
                and alive(entry.path)
            ]
        return found

    def peer_plans(self) -> dict[str, GrantPlan]:
        """The writable grants and programs that the *other* live hosts published, keyed
        by a name that says whose they are. A host is live while it holds its lock."""
        found: dict[str, GrantPlan] = {}
        with self._places() as places:
            for directory in self._peers(places):
                for name, plan in read_plans(directory / _GRANTS).items():
                    found[f"{name} (enabled by another caplet process)"] = plan
        return found

    def close(self) -> None:
        """Remove the directory and everything in it, then its lock; idempotent."""
        if self._lock_fd < 0:
            return
        try:
            remove_snapshot(self.path)
            self._lock.unlink(missing_ok=True)
            for beacon, _ in self._beacons:
                remove_snapshot(beacon)
                beacon.with_name(beacon.name + LOCK).unlink(missing_ok=True)
        finally:
            os.close(self._lock_fd)
            self._lock_fd = -1
            for _, fd in self._beacons:
                os.close(fd)
            self._beacons = []
            for meeting in self._meetings:
                if meeting.fd >= 0:
                    os.close(meeting.fd)
            self._meetings = ()


def unseen_warning(reason: str) -> str:
    """What an unseen host (:attr:`RunDir.unseen`) tells its user, and what it refuses."""
    return (
        "this process could not publish where every caplet process of this user looks "
        f"({reason}), so one with another home or state directory does not see which "
        "folders this process imports from, nor what its plugins may write and run; "
        "plugins with fs.write or proc.exec are refused here until that is fixed"
    )


def unchecked_warning(reason: str) -> str:
    """What a host whose peers cannot all be checked (:meth:`RunDir.meeting_problem`)
    tells its user, and what it refuses."""
    return (
        "the other caplet processes of this user cannot all be checked "
        f"({reason}), so a plugin with fs.write or proc.exec might write what one of them "
        "runs; such plugins are refused here until that is fixed"
    )


def _problem(places: MeetingPlaces, own: Sequence[Meeting]) -> str:
    """:meth:`RunDir.meeting_problem` of ``places`` and this host's meeting folders."""
    problems = list(places.unchecked)
    there = {_identity(folder.fd) for folder in places.folders}
    problems += [
        f"{meeting.name}, where this process meets the others, is no longer a private "
        "folder of yours at that name (removed, renamed or opened to others): start this "
        "process again"
        for meeting in own
        if _identity(meeting.fd) not in there
    ]
    return "; ".join(problems)


def _paths(places: MeetingPlaces) -> tuple[Path, ...]:
    """The meeting folders of ``places``, each reached through its checked descriptor."""
    return tuple(folder.path for folder in places.folders)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _shared_run() -> Path | None:
    """The user's platform state directory's ``run`` folder, where every host of the
    user keeps a beacon or its run directory; None when no such folder can be named."""
    try:
        return user_state_dir() / RUN_SUBDIR
    except (OSError, RuntimeError):  # no home to name it by
        return None


def _platform_beacon(own_parent: Path) -> tuple[Path, int] | None:
    """This host's beacon in the user's platform ``run`` folder and its locked lock
    (module docstring); None when the host's own ``run`` folder is that one, or when the
    beacon cannot be made there (a read-only home: the meeting folders remain)."""
    shared = _shared_run()
    if shared is None:
        return None
    try:
        if shared.exists() and shared.samefile(own_parent):
            return None
        return make_beacon(ensure_private_dir(ensure_private_dir(shared.parent) / RUN_SUBDIR))
    except (OSError, StoreError):
        return None


def _by_identity(paths: Iterable[Path], *, missing_too: bool = True) -> list[Path]:
    """``paths`` once each by device and inode (two spellings of one folder are one),
    ordered by them. One that cannot be looked up raises OSError, or is left out when
    not ``missing_too``."""
    found: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            if missing_too:
                raise
            continue
        found.setdefault((info.st_dev, info.st_ino), path)
    return [found[key] for key in sorted(found)]


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (atomically
    replaced; ephemeral, so not fsynced)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise
