"""Where caplet keeps its state, and making sure nobody else can touch it.

The state directory holds approvals and the decision log; the threat model
(design.md section 2) counts tampering with them as an attack, so the
directory must be private to the user running caplet.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import platformdirs

from caplet._errors import StoreError

__all__ = [
    "STATE_DIR_ENV",
    "default_state_dir",
    "default_state_dirs",
    "ensure_private_dir",
    "user_state_dir",
]

#: Environment variable that overrides the state directory (like ``--state-dir``).
STATE_DIR_ENV = "CAPLET_STATE_DIR"

_PRIVATE = 0o700
_GROUP_OTHER = 0o077


def default_state_dir() -> Path:
    """``$CAPLET_STATE_DIR`` when set and non-empty, else the user state dir.

    The fallback is ``platformdirs.user_state_path("caplet")``, i.e.
    ``$XDG_STATE_HOME/caplet`` or ``~/.local/state/caplet`` on Linux.
    """
    override = os.environ.get(STATE_DIR_ENV, "")
    if override:
        return Path(override).expanduser()
    return platformdirs.user_state_path("caplet", appauthor=False)


def user_state_dir() -> Path:
    """The platform's user state dir (``~/.local/state/caplet``), whatever
    ``CAPLET_STATE_DIR`` says: where every host of this user meets its peers."""
    return platformdirs.user_state_path("caplet", appauthor=False)


def default_state_dirs() -> tuple[Path, ...]:
    """Every state directory a host of this user picks by default: the one
    ``CAPLET_STATE_DIR`` names (when set) and the platform's user state dir."""
    platform = user_state_dir()
    chosen = default_state_dir()
    return (chosen,) if chosen == platform else (chosen, platform)


def ensure_private_dir(path: Path) -> Path:
    """Create *path* (and its parents) with mode ``0o700``, or check it is private.

    An existing directory that group or others can access is tightened to
    ``0o700`` when the current user owns it; one owned by another user is
    refused, since that user could rewrite caplet's approvals. Returns *path*.
    """
    try:
        path.mkdir(mode=_PRIVATE, parents=True, exist_ok=True)
        st = path.stat()
    except FileExistsError as exc:
        raise StoreError(
            f"state directory {path} exists but is not a directory; "
            "move that file away or choose another --state-dir"
        ) from exc
    except OSError as exc:
        fix = (
            "no space left on device; free space on that file system and run the command again"
            if exc.errno == errno.ENOSPC
            else f"{exc.strerror}; check the permissions of its parent or choose another "
            "--state-dir"
        )
        raise StoreError(f"cannot create the state directory {path}: {fix}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(
            f"state directory {path} exists but is not a directory; "
            "move that file away or choose another --state-dir"
        )
    if st.st_uid != os.geteuid():
        raise StoreError(
            f"state directory {path} is owned by uid {st.st_uid}, not by you "
            f"(uid {os.geteuid()}); another user could rewrite caplet's approvals there; "
            "choose a directory you own with --state-dir or CAPLET_STATE_DIR"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & _GROUP_OTHER:
        try:
            # Only group/other bits are removed: mkdir(2) applies the umask,
            # and a directory left readable by others leaks the decision log.
            path.chmod(mode & ~_GROUP_OTHER)
        except OSError as exc:
            raise StoreError(
                f"state directory {path} has mode {mode:04o} (accessible by other users) "
                f"and cannot be made private ({exc.strerror}); run chmod 700 {path}"
            ) from exc
    return path
