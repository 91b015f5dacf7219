"""steer22: an audit cached by other rules is no audit of today's.

Audits are cached by content hash and auditor, and reused as they are: by ``caplet
approve``, by discovery, by every enable's danger gate and risk policy. A plugin that an
earlier caplet judged MEDIUM (its archive unread, before CPL-SCAN-006) kept that verdict
after the upgrade that reads archives: ``caplet audit`` showed the old report, and
``enable`` passed the gate on it. So each audit records the rules that made it (a digest of
the scanner's and the auditor's code, :mod:`caplet._audit._rules_digest`), and a cached audit
made by other rules, or by rules nobody recorded, is not reused: the plugin is audited
again.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tarfile
from pathlib import Path

from caplet import PluginHost
from caplet._host._loading import LoadingRules
from caplet._trust._codec import audit_to_json
from tests.conftest import PluginFactory

LOADER = """\
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        with tarfile.open(HERE / "payload.tar") as archive:
            archive.extractall("/tmp/x", filter="data")
        sys.path.insert(0, "/tmp/x")
        import evil

        return evil.X

    return {"main": {"run": run}}
"""


def _tar() -> bytes:
    data = b"import ctypes\nX = ctypes.sizeof(ctypes.c_int)\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("evil.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _options(tmp_path: Path) -> dict[str, object]:
    return {"state_dir": tmp_path / "state", "auditor": None, "loading": LoadingRules()}


def _write_cached(state_dir: Path, payload: dict[str, object]) -> None:
    """Put an audit row in the store as an earlier caplet wrote it."""
    with sqlite3.connect(state_dir / "caplet.db") as conn:
        conn.execute(
            "INSERT OR REPLACE INTO audits (content_hash, model, plugin, created_at, payload) "
            "VALUES (?, '', ?, ?, ?)",
            (
                payload["content_hash"],
                payload["plugin"],
                payload["created_at"],
                json.dumps(payload),
            ),
        )
    conn.close()


def test_an_audit_cached_before_a_rule_changed_is_made_again(
    make_plugin: PluginFactory, plugins_dir: Path, tmp_path: Path
) -> None:
    directory = make_plugin("unpacks", source=LOADER)
    (directory / "payload.tar").write_bytes(_tar())
    with PluginHost(plugins_dir, **_options(tmp_path)) as host:  # type: ignore[arg-type]
        today = host.audit("unpacks")
    assert any(f.rule_id == "CPL-SCAN-006" for f in today.findings)
    # What an earlier caplet cached: the same content, no CPL-SCAN-006, MEDIUM, and no
    # record of the rules that judged it.
    earlier = json.loads(audit_to_json(today))
    earlier.pop("rules", None)
    earlier["findings"] = [f for f in earlier["findings"] if f["rule_id"] != "CPL-SCAN-006"]
    earlier["risk_level"] = "MEDIUM"
    earlier["verdict"] = "approve-with-conditions"
    earlier["risk_reasons"] = []
    earlier["summary"] = "static-only audit by an earlier caplet"
    _write_cached(tmp_path / "state", earlier)
    with PluginHost(plugins_dir, **_options(tmp_path)) as host:  # type: ignore[arg-type]
        shown = host.audit("unpacks")
        assert shown.summary != "static-only audit by an earlier caplet"
        assert any(f.rule_id == "CPL-SCAN-006" for f in shown.findings)
    with PluginHost(plugins_dir, **_options(tmp_path)) as host:  # type: ignore[arg-type]
        _write_cached(tmp_path / "state", earlier)
        host.discover()
        outcome = host.enable("unpacks", consent=True)
        assert not outcome, "enabled on an audit made by rules that are not today's"
        assert "CPL-SCAN-006" in outcome.reason


def test_an_audit_cached_by_todays_rules_is_reused(
    make_plugin: PluginFactory, plugins_dir: Path, tmp_path: Path
) -> None:
    """Near miss: the cache still saves the work (a model's answer above all)."""
    make_plugin("p")
    with PluginHost(plugins_dir, **_options(tmp_path)) as host:  # type: ignore[arg-type]
        first = host.audit("p")
    kept = json.loads(audit_to_json(first))
    kept["summary"] = "cached, and reused"
    _write_cached(tmp_path / "state", kept)
    with PluginHost(plugins_dir, **_options(tmp_path)) as host:  # type: ignore[arg-type]
        assert host.audit("p").summary == "cached, and reused"
        assert host.enable("p", consent=True)
