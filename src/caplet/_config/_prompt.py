"""Interactive configuration through a small :class:`Prompter` interface.

The rules are seed 000's: a field marked ``prompt`` is always asked (even
with a default), a field without a default is asked when it has no value
yet, and every other field silently takes its default. Inline ``key=value``
values override all of that, which the caller expresses with ``skip_keys``.

The terminal side (rich, hidden input for ``secret`` fields) lives in the
CLI; tests use a scripted prompter. Nothing here prints a value.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from caplet._config._coerce import coerce_inline, validate_value
from caplet._config._schema import ConfigField, ConfigValue
from caplet._errors import ConfigError

__all__ = ["PromptAnswers", "Prompter", "fields_to_prompt", "prompt_answers", "prompt_values"]


class Prompter(Protocol):
    """Asks the user for one field's value."""

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        """Return the raw answer; an empty string means "keep the current value or default".

        ``current`` is the value already configured, if any (the prompter
        must mask it when ``field.secret``), and input for a secret field
        must not be echoed.
        """
        ...


def fields_to_prompt(
    fields: Sequence[ConfigField],
    current: Mapping[str, ConfigValue],
    skip_keys: Collection[str] = (),
) -> list[ConfigField]:
    """The fields that must be asked, in declaration order.

    Those marked ``prompt`` and those with neither a default nor a current
    value; ``skip_keys`` (typically the keys given inline) are never asked.
    """
    return [
        f
        for f in fields
        if f.name not in skip_keys and (f.prompt or (not f.has_default and f.name not in current))
    ]


def prompt_values(
    plugin: str,
    fields: Sequence[ConfigField],
    current: Mapping[str, ConfigValue],
    prompter: Prompter,
    skip_keys: Collection[str] = (),
    *,
    max_attempts: int = 3,
) -> dict[str, ConfigValue]:
    """Ask every field of :func:`fields_to_prompt` and return the values obtained.

    An empty (or blank) answer keeps the current value, else the default; a
    field with neither is asked again. An answer that does not coerce or
    validate is asked again too. Both count as failed attempts, so a
    prompter that can only answer ``""`` (stdin closed) cannot loop forever:
    after ``max_attempts`` failures a :class:`ConfigError` names the plugin
    and the field and says how to pass the value inline instead.
    """
    return prompt_answers(
        plugin, fields, current, prompter, skip_keys, max_attempts=max_attempts
    ).values


@dataclass(frozen=True, slots=True)
class PromptAnswers:
    """The values a prompt obtained, and which of them were typed (not blank).

    A blank answer takes the current value or the default: what was offered,
    not a value the operator chose (red-team round 4), so only ``typed``
    fields count as the operator's own (:mod:`caplet._host._defaults`).
    """

    values: dict[str, ConfigValue]
    typed: frozenset[str]


def prompt_answers(
    plugin: str,
    fields: Sequence[ConfigField],
    current: Mapping[str, ConfigValue],
    prompter: Prompter,
    skip_keys: Collection[str] = (),
    *,
    max_attempts: int = 3,
) -> PromptAnswers:
    """:func:`prompt_values`, also saying which answers were typed."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    values: dict[str, ConfigValue] = {}
    typed: set[str] = set()
    for field in fields_to_prompt(fields, current, skip_keys):
        value, was_typed = _ask_field(
            plugin, field, current.get(field.name), prompter, max_attempts
        )
        values[field.name] = value
        if was_typed:
            typed.add(field.name)
    return PromptAnswers(values=values, typed=frozenset(typed))


def _ask_field(
    plugin: str,
    field: ConfigField,
    current: ConfigValue | None,
    prompter: Prompter,
    max_attempts: int,
) -> tuple[ConfigValue, bool]:
    """The field's value, and whether it was typed (True) or taken blank (False)."""
    for _ in range(max_attempts):
        answer = prompter.ask(plugin, field, current).strip()
        try:
            if answer:
                return coerce_inline(plugin, field, answer), True
            # The current value is re-validated: the schema may have changed
            # (a lower maximum in a new version) since it was stored.
            if current is not None:
                return validate_value(plugin, field, current), False
            if field.default is not None:
                return validate_value(plugin, field, field.default), False
        except ConfigError:
            continue
    raise ConfigError(
        f"plugin {plugin!r}: config field {field.name!r}: gave up after {max_attempts} "
        f"invalid answers; pass it inline: {field.name}=value"
    )
