"""Property tests of configuration coercion: only ConfigError, and coerced values are stable."""

from __future__ import annotations

import math

from hypothesis import assume, given
from hypothesis import strategies as st

from caplet._config._coerce import coerce_inline, parse_inline, validate_value
from caplet._config._schema import ConfigField, ConfigType
from caplet._errors import ConfigError
from tests._fuzz.budget import fuzz

SCALARS = (ConfigType.STRING, ConfigType.NUMBER, ConfigType.INTEGER, ConfigType.BOOLEAN)
bounds = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False))


@st.composite
def fields(draw: st.DrawFn) -> ConfigField:
    kind = draw(st.sampled_from(list(ConfigType)))
    low, high = draw(bounds), draw(bounds)
    if low is not None and high is not None and low > high:
        low, high = high, low
    try:
        return ConfigField(
            name="field",
            type=kind,
            minimum=low if kind in (ConfigType.NUMBER, ConfigType.INTEGER) else None,
            maximum=high if kind in (ConfigType.NUMBER, ConfigType.INTEGER) else None,
            max_length=draw(st.one_of(st.none(), st.integers(0, 20))),
            items=draw(st.sampled_from(SCALARS)),
        )
    except ConfigError:
        assume(False)
        raise


raw_values = st.one_of(
    st.text(max_size=40),
    st.integers(-(10**20), 10**20).map(str),
    st.floats().map(repr),
    st.sampled_from(["true", "false", "yes", "no", "1", "0", "nan", "inf", "-inf", "1e309"]),
    st.lists(st.text(alphabet="ab,1 []\"'", max_size=5), max_size=4).map(",".join),
    st.lists(st.integers(-5, 5), max_size=4).map(str),
)


@fuzz(200)
@given(fields(), raw_values)
def test_coercion_raises_only_config_error_and_is_stable(field: ConfigField, raw: str) -> None:
    try:
        value = coerce_inline("p", field, raw)
    except ConfigError as exc:
        refusal = str(exc)
        assert "'p'" in refusal, "a refusal names the plugin"
        return
    # What coercion returns is already valid and normal: validating it changes nothing.
    assert validate_value("p", field, value) == value
    if isinstance(value, float):
        assert math.isfinite(value)


@fuzz(150)
@given(
    fields(),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=10),
        st.lists(st.one_of(st.integers(), st.text(max_size=3), st.booleans()), max_size=4),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    ),
)
def test_validation_raises_only_config_error(field: ConfigField, value: object) -> None:
    try:
        normal = validate_value("p", field, value)
    except ConfigError:
        return
    assert validate_value("p", field, normal) == normal


@fuzz(150)
@given(st.lists(st.text(max_size=12), max_size=6))
def test_inline_entries_split_at_the_first_equals(entries: list[str]) -> None:
    pairs = parse_inline(entries)
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), "a repeated key is kept once"
    assert all(key and key == key.strip() for key in keys)
    for key, value in pairs:
        # The value is the last entry's for its key, trimmed.
        last = [e for e in entries if "=" in e and e.partition("=")[0].strip() == key][-1]
        assert value == last.partition("=")[2].strip()
