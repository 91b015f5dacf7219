"""attack37: an inotify watch, the one kernel channel between two plugins' sandboxes.

Every worker's jail shows the same runtime files (the interpreter's standard library
under ``/caplet``) and the same ``/dev/null``, and an inotify watch is on an inode,
whoever opens it and through whichever mount: one plugin watching ``json/__init__.py``
learnt each time another plugin's worker opened it (an event of 16 bytes per open, read
or close), so two plugins of one author, one granted the user's files and no network,
the other granted the network and no files, passed the files across without
``ctx.plugins.call`` (a bit an event), and a watch on ``/dev/null`` saw every process on
the machine open it. seccomp refuses inotify to a worker that cannot exec now, as it
refuses epoll instances (attack10): nothing a pure Python worker runs needs it.

Run in real workers of the red-team host (the static gate, which refuses ctypes, off:
the worker's own layers are what is measured), as root and as an unprivileged user.
"""

from __future__ import annotations

import errno

import pytest

from caplet import PluginHost
from tests.conftest import PluginFactory

LISTENER = """
import ctypes
import json
import os

LIBC = ctypes.CDLL(None, use_errno=True)
IN_NONBLOCK = 0o4000
IN_ACCESS, IN_OPEN = 0x1, 0x20
WATCH = []


def create_functions(config):
    def watch():
        fd = LIBC.inotify_init1(IN_NONBLOCK)
        if fd < 0:
            return ["refused", ctypes.get_errno()]
        wd = LIBC.inotify_add_watch(fd, json.__file__.encode(), IN_ACCESS | IN_OPEN)
        if wd < 0:
            return ["refused", ctypes.get_errno()]
        WATCH.append(fd)
        return ["watching", json.__file__]

    def heard():
        try:
            return len(os.read(WATCH[0], 4096))
        except BlockingIOError:
            return 0

    return {"main": {"watch": watch, "heard": heard}}
"""

SPEAKER = """
import json


def create_functions(config):
    def say(path):
        with open(path or json.__file__, "rb") as file:
            return len(file.read(16))

    return {"main": {"say": say}}
"""


@pytest.fixture
def pair(make_plugin: PluginFactory, red_team_host: PluginHost) -> PluginHost:
    make_plugin(
        "listener", source=LISTENER, modules='[modules.main]\nfunctions = ["watch", "heard"]\n'
    )
    make_plugin("speaker", source=SPEAKER, modules='[modules.main]\nfunctions = ["say"]\n')
    red_team_host.discover()
    for name in ("listener", "speaker"):
        outcome = red_team_host.enable(name, consent=True)
        assert outcome, outcome.reason
    return red_team_host


@pytest.mark.security
def test_a_plugin_cannot_hear_another_plugins_worker_open_a_shared_file(pair: PluginHost) -> None:
    """On main, as root and as a user, ``watch`` answered ``["watching", ...]`` and ``heard``
    48 bytes (open, access, close) after the speaker's call: a message between two
    sandboxes that share no grant."""
    answer = pair.call("listener", "main.watch")
    assert answer == ["refused", errno.EPERM], answer
    assert pair.call("speaker", "main.say", "/dev/null") == 0
    assert pair.call("speaker", "main.say", None) == 16, "the shared runtime is read as before"
