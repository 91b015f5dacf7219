"""Where state lives, and that it stays private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from caplet._errors import StoreError
from caplet._trust._paths import STATE_DIR_ENV, default_state_dir, ensure_private_dir


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_env_var_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "custom"))
    assert default_state_dir() == tmp_path / "custom"


def test_empty_env_var_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(STATE_DIR_ENV, "")
    assert default_state_dir() == tmp_path / "xdg" / "caplet"


def test_platformdirs_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    assert default_state_dir() == tmp_path / "xdg" / "caplet"
    assert not (tmp_path / "xdg").exists()


def test_creates_nested_private_dir(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state"
    assert ensure_private_dir(target) == target
    assert target.is_dir()
    assert mode_of(target) == 0o700


def test_existing_private_dir_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.mkdir(mode=0o700)
    (target / "keep").write_text("x")
    ensure_private_dir(target)
    assert (target / "keep").read_text() == "x"
    assert mode_of(target) == 0o700


@pytest.mark.parametrize("loose", [0o755, 0o770, 0o701, 0o777])
def test_loose_dir_is_tightened(tmp_path: Path, loose: int) -> None:
    target = tmp_path / "state"
    target.mkdir()
    target.chmod(loose)
    ensure_private_dir(target)
    assert mode_of(target) == 0o700


def test_file_in_the_way(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_text("not a dir")
    with pytest.raises(StoreError) as info:
        ensure_private_dir(target)
    assert f"state directory {target} exists but is not a directory" in str(info.value)
    assert "choose another --state-dir" in str(info.value)
    assert target.read_text() == "not a dir"


def test_file_as_a_parent(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError) as info:
        ensure_private_dir(tmp_path / "file" / "state")
    assert "cannot create the state directory" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory away")
def test_dir_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.mkdir(mode=0o755)
    os.chown(target, 65534, 65534)
    with pytest.raises(StoreError) as info:
        ensure_private_dir(target)
    assert f"state directory {target} is owned by uid 65534, not by you" in str(info.value)
    assert "--state-dir" in str(info.value)
    assert mode_of(target) == 0o755
