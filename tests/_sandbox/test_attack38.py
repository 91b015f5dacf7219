"""attack38: a lock on a file every jail shows, a channel between two plugins' sandboxes
that attack37's inotify refusal left.

attack37 refused inotify to a worker that cannot exec because a watch on a file every
jail shows (the runtime's ``json/__init__.py``, ``/dev/null``) heard another plugin's
worker open it: a channel between two sandboxes that share no grant. An advisory lock is
on the same inode: one plugin's worker holds ``flock(LOCK_EX)`` on the shared runtime
file, opened read-only, and another plugin's worker sees ``LOCK_EX | LOCK_NB`` refused
(``EWOULDBLOCK``) while it is held and granted once it is let go, a bit a call, no grant
and no ``ctx.plugins.call``. POSIX and OFD locks (``F_GETLK`` needs no write access) do
the same. Neither Landlock nor the mounts mediate locks, seccomp cannot tell which file
a descriptor names, and ``flock``/``fcntl`` locks stay allowed (SQLite and ``filelock``
need them, ``docs/security.md``'s lease row): open, strict xfail until a worker's runtime
is its own inode (an overlay per jail) or locks are refused to workers that write no
file.
"""

from __future__ import annotations

import pytest

from caplet import PluginHost
from tests.conftest import PluginFactory

HOLDER = """
import fcntl
import json

HELD = []


def create_functions(config):
    def hold():
        file = open(json.__file__, "rb")
        fcntl.flock(file, fcntl.LOCK_EX)
        HELD.append(file)
        return True

    def release():
        for file in HELD:
            file.close()
        HELD.clear()
        return True

    return {"main": {"hold": hold, "release": release}}
"""

PROBER = """
import fcntl
import json


def create_functions(config):
    def held():
        with open(json.__file__, "rb") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(file, fcntl.LOCK_UN)
            return False

    return {"main": {"held": held}}
"""


@pytest.fixture
def pair(make_plugin: PluginFactory, red_team_host: PluginHost) -> PluginHost:
    make_plugin(
        "holder", source=HOLDER, modules='[modules.main]\nfunctions = ["hold", "release"]\n'
    )
    make_plugin("prober", source=PROBER, modules='[modules.main]\nfunctions = ["held"]\n')
    red_team_host.discover()
    for name in ("holder", "prober"):
        outcome = red_team_host.enable(name, consent=True)
        assert outcome, outcome.reason
    return red_team_host


@pytest.mark.security
@pytest.mark.xfail(
    strict=True,
    reason="attack38 open: a flock on a runtime file every jail shows is seen by another "
    "plugin's worker (EWOULDBLOCK while held): a channel between sandboxes that share no "
    "grant; locks stay allowed (SQLite, filelock) and the runtime is one inode for all jails",
)
def test_a_plugin_cannot_see_another_plugins_lock_on_a_shared_file(pair: PluginHost) -> None:
    """As root and as a user: ``held`` answers True while the holder holds its lock and
    False once it is let go; two bits across, each way a call."""
    assert pair.call("prober", "main.held") is False
    assert pair.call("holder", "main.hold") is True
    heard = pair.call("prober", "main.held")
    assert pair.call("holder", "main.release") is True
    assert heard is False, "the prober saw the holder's lock on the shared runtime file"
