"""Interactive prompting through the Prompter protocol, with a scripted prompter."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from caplet._config._prompt import PromptAnswers, fields_to_prompt, prompt_answers, prompt_values
from caplet._config._schema import ConfigField, ConfigType, ConfigValue
from caplet._errors import ConfigError

ROOT = ConfigField("root", ConfigType.STRING, prompt=True)
MAX_KB = ConfigField("max_kb", ConfigType.INTEGER, default=256, maximum=1024)
VERBOSE = ConfigField("verbose", ConfigType.BOOLEAN, default=False, prompt=True)
TOKEN = ConfigField("token", ConfigType.STRING, secret=True)
SCHEMA = [ROOT, MAX_KB, VERBOSE, TOKEN]


@dataclass
class ScriptedPrompter:
    """Answers from a list, recording every question (field name, current value)."""

    answers: list[str]
    asked: list[tuple[str, str, ConfigValue | None]] = field(default_factory=list)

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        self.asked.append((plugin, field.name, current))
        if not self.answers:
            raise AssertionError(f"unexpected extra question for {field.name}")
        return self.answers.pop(0)


def test_fields_to_prompt_rules() -> None:
    names = [f.name for f in fields_to_prompt(SCHEMA, {})]
    # prompt=True always; no default and no value: asked; default, no prompt: silent.
    assert names == ["root", "verbose", "token"]


def test_fields_to_prompt_skips_fields_with_a_current_value_unless_prompt() -> None:
    names = [f.name for f in fields_to_prompt(SCHEMA, {"token": "t", "root": "/srv"})]
    assert names == ["root", "verbose"]


def test_fields_to_prompt_honours_skip_keys() -> None:
    names = [f.name for f in fields_to_prompt(SCHEMA, {}, skip_keys={"root", "token"})]
    assert names == ["verbose"]


def test_prompt_values_asks_in_declaration_order_and_coerces() -> None:
    prompter = ScriptedPrompter(["/srv/data", "yes", "s3cret"])
    values = prompt_values("fs-read", SCHEMA, {}, prompter)
    assert values == {"root": "/srv/data", "verbose": True, "token": "s3cret"}
    assert [name for _, name, _ in prompter.asked] == ["root", "verbose", "token"]
    assert all(plugin == "fs-read" for plugin, _, _ in prompter.asked)


def test_empty_answer_keeps_current_then_default() -> None:
    prompter = ScriptedPrompter(["", ""])
    values = prompt_values("p", [ROOT, VERBOSE], {"root": "/srv/old"}, prompter)
    assert values == {"root": "/srv/old", "verbose": False}
    assert prompter.asked == [("p", "root", "/srv/old"), ("p", "verbose", None)]


def test_blank_answer_counts_as_empty() -> None:
    prompter = ScriptedPrompter(["   "])
    assert prompt_values("p", [VERBOSE], {}, prompter) == {"verbose": False}


def test_empty_answer_without_current_or_default_asks_again() -> None:
    prompter = ScriptedPrompter(["", "/srv"])
    assert prompt_values("p", [ROOT], {}, prompter) == {"root": "/srv"}
    assert len(prompter.asked) == 2


def test_invalid_answer_asks_again() -> None:
    field_ = ConfigField("max_kb", ConfigType.INTEGER, maximum=10, prompt=True)
    prompter = ScriptedPrompter(["lots", "99", "7"])
    assert prompt_values("p", [field_], {}, prompter) == {"max_kb": 7}
    assert len(prompter.asked) == 3


def test_gives_up_after_max_attempts() -> None:
    prompter = ScriptedPrompter(["maybe", "perhaps", "dunno"])
    with pytest.raises(ConfigError) as info:
        prompt_values("fs-read", [VERBOSE], {}, prompter)
    assert str(info.value) == (
        "plugin 'fs-read': config field 'verbose': gave up after 3 invalid answers; "
        "pass it inline: verbose=value"
    )


def test_endless_empty_answers_give_up() -> None:
    prompter = ScriptedPrompter(["", ""])
    with pytest.raises(
        ConfigError, match=r"gave up after 2 invalid answers; pass it inline: root="
    ):
        prompt_values("p", [ROOT], {}, prompter, max_attempts=2)


def test_invalid_current_value_is_not_kept() -> None:
    # The schema's maximum dropped since the value was stored: keeping it
    # silently would exceed the new bound.
    prompter = ScriptedPrompter(["", "8"])
    field_ = ConfigField("max_kb", ConfigType.INTEGER, maximum=10, prompt=True)
    assert prompt_values("p", [field_], {"max_kb": 500}, prompter) == {"max_kb": 8}


def test_returns_only_prompted_values() -> None:
    prompter = ScriptedPrompter(["/srv"])
    values = prompt_values("p", [ROOT, MAX_KB], {}, prompter)
    assert values == {"root": "/srv"}


def test_skip_keys_are_not_asked() -> None:
    prompter = ScriptedPrompter([])
    assert prompt_values("p", [ROOT], {}, prompter, skip_keys=["root"]) == {}


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        prompt_values("p", [ROOT], {}, ScriptedPrompter([]), max_attempts=0)


def test_only_typed_answers_are_the_operators_own() -> None:
    """A blank answer takes what was offered (the current value or the default): not a
    value the operator chose (red-team round 4)."""
    prompter = ScriptedPrompter(["", "yes"])
    answers = prompt_answers("p", [ROOT, VERBOSE, MAX_KB], {"root": "/srv/old"}, prompter)
    assert answers == PromptAnswers(
        values={"root": "/srv/old", "verbose": True}, typed=frozenset({"verbose"})
    )
