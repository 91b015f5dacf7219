"""``caplet scan``: modes, targets (directory, file, sdist, wheel), SARIF, rules, exit codes."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._scan._rules import RULES

runner = CliRunner()

DROPPER = 'import base64\nexec(base64.b64decode("cHJpbnQoMSk="))\n'
BENIGN = "import subprocess\n\ndef run():\n    return subprocess.run(['ls'], check=True)\n"
SCHEMA = Path(__file__).parent.parent / "_scan" / "data" / "sarif-schema-2.1.0.json"


def run(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def package(tmp_path: Path, source: str) -> Path:
    root = tmp_path / "pkg"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(source, encoding="utf-8")
    return root


def test_a_plain_directory_is_scanned_in_package_mode(tmp_path: Path) -> None:
    # subprocess alone is no threat: the prefilter clears the file unparsed
    document = run("scan", str(package(tmp_path, BENIGN)))
    assert (document["mode"], document["ok"], document["findings"]) == ("package", True, [])
    assert (document["files_scanned"], document["files_parsed"]) == (1, 0)


def test_capabilities_in_a_parsed_package_file_are_observed_not_danger(tmp_path: Path) -> None:
    # eval needs a payload source in the file (here marshal) before the prefilter parses it
    source = BENIGN + "import marshal\nprint(eval('1 + 1'))\n"
    document = run("scan", str(package(tmp_path, source)))
    assert document["ok"] is True
    assert document["files_parsed"] == 1
    observed = {f["rule_id"] for f in document["findings"]}
    # imports are always visited; of the other statements only those near a threat token
    assert {"CPL-PROC-002", "CPL-DYN-001"} <= observed
    assert {f["severity"] for f in document["findings"]} == {"info"}
    assert all(f["message"].startswith("observed capability:") for f in document["findings"])


def test_a_threat_in_a_package_is_danger_and_exits_1(tmp_path: Path) -> None:
    document = run("scan", str(package(tmp_path, DROPPER)), code=1)
    assert [f["rule_id"] for f in document["findings"] if f["severity"] == "danger"] == [
        "CPL-THR-001"
    ]
    assert document["findings"][0]["file"] == "pkg/__init__.py"
    assert document["findings"][0]["line"] == 2


def test_plugin_mode_makes_the_same_capability_danger(tmp_path: Path) -> None:
    root = package(tmp_path, BENIGN)
    document = run("scan", str(root), "--mode", "plugin", code=1)
    assert document["mode"] == "plugin"
    assert "CPL-PROC-001" in {
        f["rule_id"] for f in document["findings"] if f["severity"] == "danger"
    }


def test_a_plugin_directory_with_a_manifest_is_plugin_mode(
    tmp_path: Path, examples_copy: Path
) -> None:
    document = run("scan", str(examples_copy / "shell-out"), code=1)
    assert document["mode"] == "plugin"
    forced = run("scan", str(examples_copy / "shell-out"), "--mode", "package")
    assert forced["mode"] == "package"


def test_an_sdist_and_a_wheel_are_scanned_without_extracting(tmp_path: Path) -> None:
    sdist = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        data = DROPPER.encode()
        info = tarfile.TarInfo("evil-1.0/evil/__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    wheel = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("evil/__init__.py", DROPPER)
    for archive in (sdist, wheel):
        document = run("scan", str(archive), code=1)
        dangers = [f for f in document["findings"] if f["severity"] == "danger"]
        assert [(f["rule_id"], f["file"]) for f in dangers] == [("CPL-THR-001", "evil/__init__.py")]
    assert {p.name for p in tmp_path.iterdir()} == {sdist.name, wheel.name}  # nothing extracted


def test_an_archive_with_a_traversal_member_is_danger(tmp_path: Path) -> None:
    sdist = tmp_path / "trick-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        info = tarfile.TarInfo("trick-1.0/../../etc/cron.d/x")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    document = run("scan", str(sdist), code=1)
    assert [f["rule_id"] for f in document["findings"]] == ["CPL-ARC-001"]


def test_sarif_output_validates_against_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "report.sarif"
    run("scan", str(package(tmp_path, DROPPER)), "--sarif", str(out), code=1)
    log = json.loads(out.read_text(encoding="utf-8"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(log)
    (result,) = log["runs"][0]["results"][:1]
    assert result["ruleId"] == "CPL-THR-001"
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


def test_rules_lists_the_whole_catalogue() -> None:
    document = run("scan", "--rules")
    assert [r["id"] for r in document["rules"]] == sorted(RULES)
    thr = next(r for r in document["rules"] if r["id"] == "CPL-THR-001")
    assert (thr["kind"], thr["severity"]) == ("threat", "danger")
    assert thr["rationale"]


def test_a_missing_target_is_a_usage_error() -> None:
    result = runner.invoke(app, ["scan", "--json"])
    assert result.exit_code == 2
    assert "caplet scan needs a TARGET" in result.stdout


def test_a_missing_path_in_package_mode_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["scan", str(tmp_path / "nope"), "--mode", "package", "--json"])
    assert result.exit_code == 2
    assert "no such file or directory" in result.stdout


def test_human_output_groups_by_file_with_the_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["scan", str(package(tmp_path, DROPPER))])
    assert result.exit_code == 1
    assert "pkg/__init__.py" in result.stdout
    assert "2:1" in result.stdout
    assert 'exec(base64.b64decode("cHJpbnQoMSk="))' in result.stdout
    assert "1 danger" in result.stdout


# -- many targets (issue 16) --------------------------------------------------------------


def test_several_targets_are_one_document_and_one_exit_code(tmp_path: Path) -> None:
    clean = package(tmp_path / "clean", BENIGN)
    bad = package(tmp_path / "bad", DROPPER)
    document = run("scan", str(clean), str(bad), "--jobs", "2", code=1)
    assert document["ok"] is False
    assert [(t["target"], t["ok"]) for t in document["targets"]] == [
        (str(clean), True),
        (str(bad), False),
    ]


def test_a_folder_of_sdists_scans_each_of_them(tmp_path: Path) -> None:
    from tests._scan.index import sdist

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    (downloads / "good-1.0.tar.gz").write_bytes(sdist("good", "1.0", {"good.py": BENIGN}))
    (downloads / "bad-1.0.tar.gz").write_bytes(sdist("bad", "1.0", {"bad.py": DROPPER}))
    document = run("scan", str(downloads), code=1)
    verdicts = {Path(t["target"]).name: t["ok"] for t in document["targets"]}
    assert verdicts == {"bad-1.0.tar.gz": False, "good-1.0.tar.gz": True}


def test_a_requirements_file_is_fetched_from_the_index_and_scanned(tmp_path: Path) -> None:
    from tests._scan.index import Index, sdist, serve

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("good==1.0\nbad==2.0\n")
    index = Index(
        {
            "good": {"good-1.0.tar.gz": sdist("good", "1.0", {"good.py": BENIGN})},
            "bad": {"bad-2.0.tar.gz": sdist("bad", "2.0", {"setup.py": DROPPER})},
        }
    )
    with serve(index):
        document = run("scan", "-r", str(requirements), "--index-url", index.url, code=1)
    assert [(t["target"], t["ok"]) for t in document["targets"]] == [
        ("good==1.0", True),
        ("bad==2.0", False),
    ]


def test_an_unpinned_requirement_is_a_clear_error(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("requests>=2\n")
    document = run("scan", "-r", str(requirements), code=1)
    assert "line 1: requests is not pinned to one version" in document["error"]["message"]


def test_several_targets_must_be_paths(tmp_path: Path) -> None:
    result = runner.invoke(app, ["scan", str(tmp_path), "no-such-plugin", "--json"])
    assert result.exit_code == 2
    assert "'no-such-plugin' is not a path" in result.output
