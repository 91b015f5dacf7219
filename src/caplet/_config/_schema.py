"""The typed configuration schema a manifest declares (design.md section 3).

Only the data types live here; parsing, coercion and prompting are in the
sibling modules. Values are immutable (arrays are tuples) so a resolved
configuration can be shared between the host and its records safely.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ConfigField", "ConfigType", "ConfigValue", "ScalarValue"]

ScalarValue = str | int | float | bool
ConfigValue = ScalarValue | tuple[ScalarValue, ...]


class ConfigType(enum.Enum):
    """The value types a configuration field may have."""

    STRING = "string"
    NUMBER = "number"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    ARRAY = "array"


@dataclass(frozen=True, slots=True)
class ConfigField:
    """One field of a plugin's ``[config]`` table.

    ``prompt`` means "always ask, even when a default exists" (seed 000's
    ``promptKey``); a field with no default is always asked too. ``secret``
    values are never printed or logged (shown as ``******``). ``items`` is the
    element type of an ``array`` field (string when not given).
    """

    name: str
    type: ConfigType
    description: str = ""
    default: ConfigValue | None = None
    prompt: bool = False
    secret: bool = False
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    items: ConfigType = ConfigType.STRING

    @property
    def has_default(self) -> bool:
        """True when the schema supplies a default value."""
        return self.default is not None

    @property
    def always_prompt(self) -> bool:
        """True when interactive configuration must ask for this field."""
        return self.prompt or not self.has_default
