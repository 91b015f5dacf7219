"""Browser shortcuts rewritten to load an extension (caplet._scan._sink_shortcuts)."""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    "source",
    [
        # a Windows .lnk opened through WScript.Shell, its arguments replaced
        """
        import win32com.client
        shell = win32com.client.Dispatch("WScript.Shell")
        link = shell.CreateShortCut(path)
        link.Arguments = "--load-extension=" + ext
        link.Save()
        """,
        # a freedesktop launcher's Exec= line rewritten
        """
        for line in text.splitlines():
            if line.startswith("Exec="):
                line = f"{line} --load-extension={ext}"
        """,
        # the shortcut named by its suffix, the switch formatted into its arguments
        """
        import os
        for name in os.listdir(desktop):
            if name.endswith(".lnk"):
                patch(os.path.join(desktop, name), "{} --load-extension={}".format(args, ext))
        """,
    ],
)
def test_a_browser_shortcut_given_load_extension_is_persistence(source: str) -> None:
    assert "CPL-THR-009" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a test harness starting Chrome with an unpacked extension: no shortcut
        """
        from selenium import webdriver
        options = webdriver.ChromeOptions()
        options.add_argument("--load-extension=" + ext_dir)
        driver = webdriver.Chrome(options=options)
        """,
        # an installer writing its own launcher, with no extension flag
        """
        with open(os.path.expanduser("~/.local/share/applications/tool.desktop"), "w") as f:
            f.write("[Desktop Entry]\\nExec=tool --gui\\n")
        """,
    ],
)
def test_the_switch_without_a_shortcut_or_a_shortcut_without_it_is_not(source: str) -> None:
    assert "CPL-THR-009" not in danger(source)
