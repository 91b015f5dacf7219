"""The self-check's passes remembered across processes, for exactly the code that passed.

Replaying every rule's canary (:mod:`caplet._scan._selfcheck`) costs about
40 ms of CPU, a quarter of the start-up budget of ``caplet scan`` (issue
16: 150 ms), and its answer only changes when the code answering changes.
So a pass is written to the user's cache directory under a *fingerprint*
of everything the replay exercised, and a later process whose fingerprint
is the same skips the replay:

* caplet's version, the interpreter (``sys.version``: the ``ast`` module
  the rules read is the interpreter's) and its bytecode tag;
* the content of every file of the scanner package (rules, tables, the
  canaries themselves, the indicator data file) and of the modules outside
  it that the scanner imports (:data:`_OUTSIDE`; tests/_scan/test_checkcache.py
  checks the list against the scanner's imports);
* the content of google-re2's Python module and compiled extension: another
  build of the regex engine is another engine, checked again.

A changed file, a reinstall, another interpreter or another RE2 is a
different fingerprint, hence a full replay. What a fingerprint cannot see,
an engine that answers differently in this process (google-re2's
``Set.Match`` returns no match when it runs out of memory), is probed in
every process, cached or not (:func:`caplet._scan._selfcheck.engine_answers`):
a blind engine always gets the full replay and its failure.

Only passes are written, never failures. The file is trusted only when it
and its directory belong to the user running caplet and nobody else may
write them (the same rule as the state directory,
caplet._trust._paths.ensure_private_dir): another user who could write it
could otherwise turn the check off. A cache that cannot be read or written
(a read-only home, no home) only costs the replay.

``$XDG_CACHE_HOME`` is read by hand (XDG Base Directory specification,
"defaults to $HOME/.cache"; caplet runs on Linux only): platformdirs, which
caplet uses for the state directory, costs 10 ms to import, which the
start-up cannot spare.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import stat
import sys
from pathlib import Path
from typing import Final

import re2

from caplet._version import __version__

__all__ = ["fingerprint", "fingerprinted_files", "remember", "remembered"]

#: The modules outside the scanner package whose code the replay runs.
_OUTSIDE: Final = (
    "caplet._capabilities._model",
    "caplet._display",
    "caplet._error_base",
    "caplet._errors",
    "caplet._errors_request",
    "caplet._findings",
    "caplet._lookalikes",
    "caplet._marks",
    "caplet._reading",
    "caplet._toml",
    "caplet._version",
)
#: The file under the cache directory; its content is the fingerprint that passed.
_FILE: Final = "scan-self-check"
_GROUP_OTHER_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH


def fingerprint() -> str | None:
    """The hex digest of what the replay depends on; ``None`` when a file cannot be read
    (then nothing is remembered, and every process replays)."""
    digest = hashlib.sha256()
    header = f"{__version__}\0{sys.version}\0{sys.implementation.cache_tag}\0"
    digest.update(header.encode())
    try:
        for path in fingerprinted_files():
            data = path.read_bytes()
            digest.update(f"{path.name}\0{len(data)}\0".encode())
            digest.update(data)
    except (OSError, AttributeError, TypeError):
        return None
    return digest.hexdigest()


def fingerprinted_files() -> list[Path]:
    """Every file whose content is in the fingerprint (raises ``OSError`` when the
    scanner's folder cannot be listed)."""
    scanner = Path(__file__).parent
    files = sorted(p for p in scanner.iterdir() if p.suffix in (".py", ".toml"))
    files += [Path(str(importlib.import_module(name).__file__)) for name in _OUTSIDE]
    files += [Path(str(re2.__file__)), Path(str(re2._re2.__file__))]
    return files


def _directory() -> Path | None:
    """``$XDG_CACHE_HOME/caplet``, else ``~/.cache/caplet``; ``None`` without a home."""
    base = Path(os.environ.get("XDG_CACHE_HOME", ""))
    if not base.is_absolute():  # the specification ignores a relative path
        home = Path(os.environ.get("HOME", ""))
        if not home.is_absolute():
            return None
        base = home / ".cache"
    return base / "caplet"


def _private(st: os.stat_result) -> bool:
    """Owned by this user, writable by nobody else."""
    return st.st_uid == os.geteuid() and not st.st_mode & _GROUP_OTHER_WRITE


def remembered(key: str) -> bool:
    """True when a private cache file says the check passed for ``key``."""
    directory = _directory()
    if directory is None:
        return False
    try:
        if not _private(os.lstat(directory)):
            return False
        fd = os.open(directory / _FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st):
            return False
        return os.read(fd, 256).decode("ascii", "replace").strip() == key
    except OSError:
        return False
    finally:
        os.close(fd)


def remember(key: str) -> None:
    """Write ``key`` as the one that passed; a cache that cannot be written is skipped.

    Not through :func:`caplet._atomic.atomic_write`: its boundaries are *state*
    write steps, counted and killed at by the crash tests, and a cache that one
    run writes and the next finds would make two runs of one command take
    different steps (tests/_host/test_update.py's kill -9 at the last step never
    came). A private temporary file renamed over the cache is atomic enough for
    a cache: a torn or missing one only costs the replay.
    """
    import tempfile  # only when a pass is new: not on the start-up path of every scan

    directory = _directory()
    if directory is None:
        return
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(directory)
        if not (stat.S_ISDIR(st.st_mode) and _private(st)):
            return
        # mkstemp: O_EXCL | O_NOFOLLOW, mode 0600, not inherited (PEP 446)
        fd, name = tempfile.mkstemp(prefix=f".{_FILE}.", suffix=".tmp", dir=directory)
        temporary = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(f"{key}\n".encode("ascii"))
            temporary.replace(directory / _FILE)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
    except OSError:
        pass  # no cache: the next process replays the canaries again
