"""A found policy file that loosens applies only once a person allowed its content.

A cloned project's ``caplet.toml`` beside its plugins directory raised
``max_risk_level``, made isolation best-effort or opened a network for whoever ran
caplet there, with a warning at every start (steer22's leftover; decide14 had only
made its ``store`` vouch for nothing). A decision that widens is a person's:
``caplet policy --allow`` records the file's digest (caplet._host._policy_allow).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._errors import PolicyError
from caplet._findings import RiskLevel
from caplet._host._policy import Isolation
from caplet._host._policy_allow import ALLOWED_FILE
from caplet._host._policy_file import PolicyOverride, allow_found_policy, load_policy
from caplet._trust._paths import user_state_dir
from tests._cli.clikit import caplet
from tests.conftest import write_policy

LOOSE = 'max_risk_level = "HIGH"\nisolation = "best-effort"\nmemory_mb = 100\n'


def test_a_found_file_that_loosens_is_left_out_until_a_person_allows_it(
    plugins_dir: Path,
) -> None:
    # On 4ecdd16c its loosenings applied (HIGH, best-effort) with a warning.
    policy = plugins_dir.parent / "caplet.toml"
    policy.write_text(LOOSE, encoding="utf-8")
    left_out = load_policy(plugins_dir, environ={})
    assert left_out.policy.max_risk_level is RiskLevel.MEDIUM
    assert left_out.policy.isolation is Isolation.STRICT
    assert left_out.policy.memory_mb != 100, "the whole file is left out, its tightening too"
    assert left_out.file is None
    assert left_out.withheld is not None
    assert left_out.withheld[0] == policy
    assert {s.field for s in left_out.withheld[1]} == {"max_risk_level", "isolation"}
    assert allow_found_policy(plugins_dir, environ={})[0] == policy
    allowed = load_policy(plugins_dir, environ={})
    assert allowed.policy.max_risk_level is RiskLevel.HIGH
    assert allowed.withheld is None
    # A change is a new decision: left out again until allowed again.
    policy.write_text(LOOSE + "untrusted_processes = 64\n", encoding="utf-8")
    assert load_policy(plugins_dir, environ={}).withheld is not None


def test_a_file_that_only_tightens_or_that_the_operator_names_needs_no_allowing(
    plugins_dir: Path,
) -> None:
    policy = plugins_dir.parent / "caplet.toml"
    policy.write_text("memory_mb = 100\n", encoding="utf-8")
    tight = load_policy(plugins_dir, environ={})
    assert tight.policy.memory_mb == 100
    assert tight.withheld is None
    policy.write_text(LOOSE, encoding="utf-8")
    named = load_policy(plugins_dir, file=policy, environ={})
    assert named.policy.max_risk_level is RiskLevel.HIGH
    by_env = load_policy(plugins_dir, environ={"CAPLET_POLICY": str(policy)})
    assert by_env.policy.isolation is Isolation.BEST_EFFORT


def test_a_host_on_a_left_out_file_says_which_and_how_to_allow_it(
    plugins_dir: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (plugins_dir.parent / "caplet.toml").write_text(LOOSE, encoding="utf-8")
    with (
        caplog.at_level(logging.WARNING, logger="caplet"),
        PluginHost(plugins_dir, state_dir=state_dir) as host,
    ):
        assert host.effective_policy.policy.max_risk_level is RiskLevel.MEDIUM
    said = [r.getMessage() for r in caplog.records]
    assert any(
        f"the policy file {plugins_dir.parent / 'caplet.toml'}, found beside the plugins "
        "directory, loosens the defaults (max_risk_level = HIGH, isolation = best-effort) and "
        "no person has allowed it: it is not applied, the defaults are; read it, then run "
        "`caplet policy --allow` (or name it with --policy)" in line
        for line in said
    ), said
    assert not [line for line in said if line.startswith("policy loosens")]


def test_an_unreadable_allow_list_allows_nothing(plugins_dir: Path) -> None:
    write_policy(plugins_dir.parent / "caplet.toml", LOOSE)
    (user_state_dir() / ALLOWED_FILE).write_text("[not json", encoding="utf-8")
    assert load_policy(plugins_dir, environ={}).withheld is not None


def test_nothing_to_allow_says_so(plugins_dir: Path) -> None:
    with pytest.raises(PolicyError, match=r"no policy file beside .*: nothing to allow"):
        allow_found_policy(plugins_dir, environ={})
    with pytest.raises(PolicyError, match=r"CAPLET_POLICY names the policy file"):
        allow_found_policy(plugins_dir, environ={"CAPLET_POLICY": "x.toml"})


def test_the_cli_shows_a_left_out_file_and_allows_it(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "caplet.toml").write_text(LOOSE, encoding="utf-8")
    shown = caplet("policy", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "no person has allowed it: it is not applied" in " ".join(shown.stdout.split())
    allowed = caplet("policy", "--allow", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "allowed" in allowed.stdout
    after = caplet("policy", cwd=tmp_path)
    assert "value(s) loosen the defaults" in " ".join(after.stdout.split())


@pytest.mark.security
def test_a_link_to_a_file_allowed_for_another_project_is_not_allowed_here(
    tmp_path: Path,
) -> None:
    # attack28: the allowing was kept under the file's resolved path, so a cloned
    # project's caplet.toml that is a link to one the user allowed for their own project
    # (its loosenings meant for their own plugins) applied it to the cloned plugins.
    mine = tmp_path / "mine"
    (mine / "plugins").mkdir(parents=True)
    write_policy(mine / "caplet.toml", LOOSE)
    assert load_policy(mine / "plugins", environ={}).policy.max_risk_level is RiskLevel.HIGH
    cloned = tmp_path / "cloned"
    (cloned / "plugins").mkdir(parents=True)
    (cloned / "caplet.toml").symlink_to(Path("..") / "mine" / "caplet.toml")
    left_out = load_policy(cloned / "plugins", environ={})
    assert left_out.policy.max_risk_level is RiskLevel.MEDIUM
    assert left_out.withheld is not None
    assert left_out.withheld[0] == cloned / "caplet.toml"


def test_a_linked_policy_file_allowed_where_it_is_found_applies(tmp_path: Path) -> None:
    # the near miss: a person's caplet.toml that links to a shared one (dotfiles) is
    # allowed where it is found, and a folder reached through a link is the same folder
    shared = tmp_path / "shared.toml"
    shared.write_text(LOOSE, encoding="utf-8")
    project = tmp_path / "project"
    (project / "plugins").mkdir(parents=True)
    (project / "caplet.toml").symlink_to(shared)
    assert load_policy(project / "plugins", environ={}).withheld is not None
    allow_found_policy(project / "plugins", environ={})
    assert load_policy(project / "plugins", environ={}).policy.max_risk_level is RiskLevel.HIGH
    through = tmp_path / "through"
    through.symlink_to(project)
    assert load_policy(through / "plugins", environ={}).policy.max_risk_level is RiskLevel.HIGH


@pytest.mark.security
def test_allowing_with_a_named_policy_file_refuses_and_allows_nothing(tmp_path: Path) -> None:
    # attack28: `--policy` was ignored by `caplet policy --allow`, which allowed the
    # project's caplet.toml beside the plugins directory (one the person neither named
    # nor read), where CAPLET_POLICY was refused with a word.
    (tmp_path / "plugins").mkdir()
    (tmp_path / "caplet.toml").write_text(LOOSE, encoding="utf-8")
    (tmp_path / "mine.toml").write_text("memory_mb = 100\n", encoding="utf-8")
    refused = caplet("policy", "--policy", "mine.toml", "--allow", cwd=tmp_path)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert (
        "--policy names the policy file (mine.toml): it is your choice and needs no "
        "allowing; run `caplet policy --allow` without --policy to allow the file beside "
        "the plugins directory"
    ) in " ".join(refused.stderr.split())
    assert load_policy(tmp_path / "plugins", environ={}).withheld is not None


def test_a_flag_appended_to_a_found_files_list_is_not_the_files_loosening(
    plugins_dir: Path,
) -> None:
    # attack28 (an honest user's): the person's own --allow-network, appended to a found
    # file's empty list, counted as the file's loosening: the file, which only tightened,
    # was left out (its memory_mb with it) and the warning blamed it for the flag.
    (plugins_dir.parent / "caplet.toml").write_text(
        "memory_mb = 100\n[network]\nallowed_networks = []\n", encoding="utf-8"
    )
    flag = PolicyOverride(
        "network.allowed_networks", "10.0.0.0/8", "--allow-network", appended=True
    )
    effective = load_policy(plugins_dir, environ={}, overrides=[flag])
    assert effective.withheld is None
    assert effective.policy.memory_mb == 100
    assert [str(n) for n in effective.policy.network.allowed_networks] == ["10.0.0.0/8"]
    # the near miss: a file that widens the list itself is still left out, flag or not
    (plugins_dir.parent / "caplet.toml").write_text(
        '[network]\nallowed_networks = ["169.254.0.0/16"]\n', encoding="utf-8"
    )
    left_out = load_policy(plugins_dir, environ={}, overrides=[flag])
    assert left_out.withheld is not None
    assert [s.field for s in left_out.withheld[1]] == ["network.allowed_networks"]
    assert "169.254.0.0/16" in str(left_out.withheld[1][0].value)
