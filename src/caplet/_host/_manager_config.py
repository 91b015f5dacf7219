"""The manager's configuration of plugins: inline values, prompts, validation, defaults.

Configuration is per process and session-specific (seed 000): it lives in
the records in memory, is validated against each manifest's schema, and is
completed with the schema's defaults when a plugin is enabled. Apart from
the rest of the lifecycle because it touches no store and no content hash.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from caplet._config._coerce import (
    coerce_inline,
    parse_inline,
    unknown_keys,
    unknown_keys_message,
    validate_value,
)
from caplet._config._prompt import Prompter, prompt_answers
from caplet._config._schema import ConfigValue
from caplet._errors import (
    ConfigError,
)
from caplet._host._manager_state import ManagerState
from caplet._host._plugin_record import PluginRecord
from caplet._host._records import (
    InlineConfigResult,
    Outcome,
    PluginState,
)

__all__ = ["ManagerConfig"]


class ManagerConfig(ManagerState):
    """Setting and completing a plugin's configuration (see the module docstring)."""

    # -- configuration ----------------------------------------------------------------------

    def apply_inline_config(self, name: str, entries: Iterable[str]) -> InlineConfigResult:
        """Apply ``key=value`` entries; unknown keys are reported, never applied.

        Invalid values raise :class:`ConfigError` naming plugin and field;
        nothing is applied unless every known entry is valid.
        """
        record = self._record(name)
        pairs = parse_inline(entries)
        unknown = tuple(unknown_keys(record.manifest.config, [k for k, _ in pairs]))
        staged: dict[str, ConfigValue] = {}
        for key, raw in pairs:
            config_field = record.manifest.config_field(key)
            if config_field is None:
                continue
            staged[key] = validate_value(name, config_field, coerce_inline(name, config_field, raw))
        record.config.update(staged)
        record.explicit.update(staged)
        if staged:
            self._config_changed(record)
        if staged and record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return InlineConfigResult(applied=tuple(staged), unknown=unknown)

    def prompt_config(self, prompter: Prompter, name: str, skip_keys: Collection[str] = ()) -> bool:
        """Ask for the fields that must be asked (``prompt``, or no default)."""
        record = self._record(name)
        answers = prompt_answers(name, record.manifest.config, record.config, prompter, skip_keys)
        values = answers.values
        record.config.update(values)
        # A blank answer took what was offered (the default): not the operator's own value.
        record.explicit.update(answers.typed)
        if values:
            self._config_changed(record)
        if record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return True

    def set_config(self, name: str, config: Mapping[str, object]) -> Outcome:
        """Replace the configuration with validated values (unknown keys refused)."""
        record = self._record(name)
        unknown = unknown_keys(record.manifest.config, config)
        if unknown:
            return Outcome(False, unknown_keys_message(name, record.manifest.config, unknown))
        validated: dict[str, ConfigValue] = {}
        for key, value in config.items():
            config_field = record.manifest.config_field(key)
            assert config_field is not None  # unknown keys were refused above
            validated[key] = validate_value(name, config_field, value)
        record.config = validated
        record.explicit = set(validated)
        self._config_changed(record)
        if record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return Outcome(True)

    def _complete_config(self, record: PluginRecord) -> dict[str, ConfigValue]:
        """Current values plus schema defaults for unset keys; every field must have one."""
        config = dict(record.config)
        missing: list[str] = []
        for config_field in record.manifest.config:
            if config_field.name in config:
                continue
            if config_field.default is not None:
                config[config_field.name] = config_field.default
            else:
                missing.append(config_field.name)
        if missing:
            example = " ".join(f"{m}=..." for m in missing)
            raise ConfigError(
                f"plugin {record.name!r}: config field(s) {', '.join(missing)} have no value "
                f"and no default; pass them inline ({example}) or answer the prompt"
            )
        return config
