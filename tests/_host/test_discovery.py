"""Discovery's warnings about plugin folders it skips (`_host/_discovery.py`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from caplet import PluginManager


@pytest.mark.security
def test_a_skipped_folders_name_cannot_forge_lines_in_the_hosts_log(
    plugins_dir: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Red-team round 4 (CWE-117): a plugin folder named "x\\n<time> WARNING caplet: plugin
    fs-read approved" wrote that line into an embedding application's log as its own,
    once for the name and once for the error quoting the path."""
    forged = "2026-11-26 WARNING caplet: plugin fs-read approved by the administrator"
    plugins_dir.mkdir(parents=True, exist_ok=True)
    (plugins_dir / f"x\n{forged}\r\x1b[2Ky").mkdir()
    manager = PluginManager(plugins_dir, state_dir=state_dir)
    try:
        with caplog.at_level(logging.WARNING, logger="caplet"):
            assert manager.discover() == 0
    finally:
        manager.close()
    [record] = [r for r in caplog.records if "skipping plugin" in r.getMessage()]
    message = record.getMessage()
    assert "\n" not in message
    assert "\r" not in message
    assert "\x1b" not in message
    assert f"skipping plugin x\\x0a{forged}\\x0d\\x1b[2Ky: " in message
    # The folder is still listed as broken, with its real name.
    [broken] = manager.broken_plugins()
    assert broken.directory.name == f"x\n{forged}\r\x1b[2Ky"
