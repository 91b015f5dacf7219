"""Prompters for the CLI: rich prompts on a terminal, a clear refusal elsewhere."""

from __future__ import annotations

from rich.console import Console
from rich.prompt import Prompt
from rich.text import Text

from caplet._cli._safe import plain
from caplet._config._coerce import SECRET_MASK
from caplet._config._schema import ConfigField, ConfigValue
from caplet._errors import ConfigError

__all__ = ["NoInputPrompter", "RichPrompter"]


class RichPrompter:
    """Ask on the terminal; secret fields are read without echo and never shown."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        # The description and default are the manifest author's: escaped Text, never
        # markup (Prompt.ask reads a str label as markup).
        shown = current if current is not None else field.default
        label = plain(plugin, "bold") + plain(f" {field.name}")
        if field.description:
            label += plain(f" ({field.description})")
        if shown is not None:
            default = SECRET_MASK if field.secret else _display(shown)
            label += Text(" ") + plain(f"[{default}]", "dim")
        answer: str = Prompt.ask(
            label, console=self.console, password=field.secret, default="", show_default=False
        )
        return answer


class NoInputPrompter:
    """Used when stdin is not a terminal: asking would hang, so say what to pass."""

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        if current is not None or field.default is not None:
            return ""
        raise ConfigError(
            f"plugin {plugin!r}: config field {field.name!r} needs a value and stdin is not a "
            f"terminal; pass it inline: {field.name}=..."
        )


def _display(value: ConfigValue) -> str:
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "y" if value else "n"
    return str(value)
