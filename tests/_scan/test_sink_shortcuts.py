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
        # the suffix in capitals, its K the Kelvin sign (lowered, it is "k"), beside other
        # strings: what the scan's joined and lowered precheck must not miss
        """
        import os
        names = ["a", "Chrome.LN\u212a", "b.desktop.bak"]
        patch(names[1], "--load-extension=" + ext)
        """,
        # a launcher's line in capitals
        """
        if line.upper().startswith("EXEC="):
            line = line + " --load-extension=" + ext
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
        # ".lnk" and "exec" inside strings, not at a string's end nor before "=" (the
        # precheck joins the strings with NULs: a NUL inside one is not a string's end)
        """
        names = ["shortcut.lnk\\0.txt", "a.lnk.txt", "exec_mode"]
        run("--load-extension=" + ext)
        """,
    ],
)
def test_the_switch_without_a_shortcut_or_a_shortcut_without_it_is_not(source: str) -> None:
    assert "CPL-THR-009" not in danger(source)
