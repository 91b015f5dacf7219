"""Output and argument validation against the manifest's JSON Schemas, and result bounds."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet import (
    CircuitOpenError,
    InvalidOutputError,
    LifecycleError,
    ManifestError,
    PluginCallError,
    PluginHost,
    PluginState,
    Policy,
    load_manifest,
)
from caplet._host._validate import compile_validators
from tests.conftest import PluginFactory

SOURCE = """
def create_functions(config):
    calls = []

    def point(x, y):
        calls.append((x, y))
        return {"x": x, "y": y}

    def bad_point(x, y):
        calls.append((x, y))
        return {"x": str(x), "y": y}

    def count():
        return len(calls)

    def blob(size):
        return "a" * size

    def distinct(count, repeat):
        # Objects cannot be sorted: jsonschema compared every pair of them.
        items = [{"n": n} for n in range(count)]
        return items + items[:1] if repeat else items

    def deep(levels):
        value = []
        for _ in range(levels):
            value = [value]
        return value

    return {"main": {"point": point, "bad_point": bad_point, "count": count,
                     "blob": blob, "deep": deep, "distinct": distinct}}
"""

POINT = '{ type = "object", required = ["x", "y"], properties = { x = { type = "integer" } } }'
ARGS = '{ type = "array", prefixItems = [{ type = "integer" }, { type = "integer" }]'
ARGS += ", minItems = 2, items = false }"
MODULES = f"""
[modules.main.functions.point]
args = {ARGS}
returns = {POINT}

[modules.main.functions.bad_point]
returns = {POINT}

[modules.main.functions.count]
[modules.main.functions.blob]
[modules.main.functions.deep]
[modules.main.functions.distinct]
returns = {{ type = "array", uniqueItems = true }}
"""


def write(make_plugin: PluginFactory, name: str = "geo", modules: str = MODULES) -> Path:
    return make_plugin(name, source=SOURCE, modules=textwrap.dedent(modules))


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


def enabled(host: PluginHost, make_plugin: PluginFactory, modules: str = MODULES) -> PluginHost:
    write(make_plugin, modules=modules)
    host.discover()
    outcome = host.enable("geo", consent=True)
    assert outcome, outcome.reason
    return host


# -- compiling -----------------------------------------------------------------------------


def test_only_functions_with_schemas_get_a_validator(make_plugin: PluginFactory) -> None:
    manifest = load_manifest(write(make_plugin))
    validators = compile_validators(manifest)
    assert sorted(validators) == ["main.bad_point", "main.distinct", "main.point"]
    point = validators["main.point"]
    assert point.args is not None
    assert point.returns is not None
    assert validators["main.bad_point"].args is None
    with pytest.raises(TypeError):
        validators["main.count"] = point  # type: ignore[index]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ('{ type = "intger" }', "at $.type: 'intger' is not valid"),
        ('{ minimum = "zero" }', "at $.minimum: 'zero' is not of type 'number'"),
        ('{ "$ref" = "https://example.com/s.json" }', "points outside this schema"),
        ('{ "$ref" = "#/$defs/missing" }', "does not resolve within this schema"),
        ('{ "$ref" = "#" }', "references loop"),
        (
            '{ "$schema" = "http://json-schema.org/draft-07/schema#" }',
            "remove it or set it to 'https://json-schema.org/draft/2020-12/schema'",
        ),
    ],
)
def test_an_unusable_schema_names_the_manifest_and_field(
    make_plugin: PluginFactory, schema: str, problem: str
) -> None:
    directory = write(make_plugin, modules=f"[modules.main.functions.point]\nreturns = {schema}\n")
    manifest = load_manifest(directory)
    with pytest.raises(ManifestError) as caught:
        compile_validators(manifest)
    assert caught.value.path == str(directory / "plugin.toml")
    assert caught.value.field == "modules.main.functions.point.returns"
    assert str(caught.value).startswith(
        f"{directory / 'plugin.toml'}: modules.main.functions.point.returns is not a usable "
        "JSON Schema: "
    )
    assert problem in str(caught.value)


def test_local_references_and_anchors_are_fine(make_plugin: PluginFactory) -> None:
    modules = """
    [modules.main.functions.point]
    returns = { "$ref" = "#/$defs/p", "$defs" = { p = { "$anchor" = "P", type = "object" } } }
    [modules.main.functions.count]
    returns = { "$ref" = "#P", "$defs" = { p = { "$anchor" = "P", type = "integer" } } }
    """
    validators = compile_validators(load_manifest(write(make_plugin, modules=modules)))
    validators["main.point"].check_result({"x": 1})
    validators["main.count"].check_result(3)
    with pytest.raises(InvalidOutputError):
        validators["main.count"].check_result("3")


def test_check_result_names_plugin_function_and_schema_path(make_plugin: PluginFactory) -> None:
    directory = write(make_plugin)
    point = compile_validators(load_manifest(directory))["main.point"]
    point.check_result({"x": 1, "y": "anything"})
    with pytest.raises(InvalidOutputError) as caught:
        point.check_result({"x": "1", "y": 2})
    error = caught.value
    assert error.plugin == "geo"
    assert error.target == "main.point"
    assert error.schema_path == "properties/x/type"
    assert str(error) == (
        "plugin 'geo': main.point returned a value that does not match its declared returns "
        "schema: at $.x: '1' is not of type 'integer' (schema path properties/x/type, "
        f"{directory / 'plugin.toml'} field modules.main.functions.point.returns); "
        "fix the plugin or its schema"
    )


def test_check_args_validates_the_positional_arguments_as_one_array(
    make_plugin: PluginFactory,
) -> None:
    point = compile_validators(load_manifest(write(make_plugin)))["main.point"]
    point.check_args((1, 2), {})
    point.check_args([1, 2], {})
    with pytest.raises(LifecycleError, match=r"at \$\[1\]: 'two' is not of type 'integer'"):
        point.check_args((1, "two"), {})
    with pytest.raises(LifecycleError, match="schema path minItems"):
        point.check_args((1,), {})
    with pytest.raises(LifecycleError, match="keyword arguments \\(y\\) cannot be checked"):
        point.check_args((1,), {"y": 2})


def test_a_huge_bad_value_is_quoted_briefly(make_plugin: PluginFactory) -> None:
    point = compile_validators(load_manifest(write(make_plugin)))["main.point"]
    with pytest.raises(InvalidOutputError) as caught:
        point.check_result(["x" * 10_000])
    assert len(str(caught.value)) < 800


# -- in the host ------------------------------------------------------------------------------


def test_enable_refuses_an_invalid_schema(host: PluginHost, make_plugin: PluginFactory) -> None:
    directory = write(make_plugin, modules="[modules.main.functions.point]\nargs = { type = 3 }\n")
    host.discover()
    outcome = host.enable("geo", consent=True)
    assert not outcome
    assert str(directory / "plugin.toml") in outcome.reason
    assert "modules.main.functions.point.args" in outcome.reason
    info = host.get_plugin("geo")
    assert info is not None
    assert info.state is not PluginState.ENABLED
    assert host.worker_pid("geo") is None
    logged = host.manager.store.decisions("geo", 1)[0]
    assert (logged.action, logged.allowed) == ("enable", False)


def test_valid_calls_pass_through(host: PluginHost, make_plugin: PluginFactory) -> None:
    enabled(host, make_plugin)
    assert host.call("geo", "main.point", 1, 2) == {"x": 1, "y": 2}
    assert host.call("geo", "main.count") == 1


def test_invalid_output_is_refused_logged_and_counts_for_the_breaker(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    enabled(host, make_plugin)
    for _ in range(3):
        with pytest.raises(InvalidOutputError, match=r"main.bad_point returned .* at \$.x"):
            host.call("geo", "main.bad_point", 1, 2)
    with pytest.raises(CircuitOpenError, match="circuit open for geo"):
        host.call("geo", "main.point", 1, 2)
    logged = [d for d in host.manager.store.decisions("geo") if d.action == "output"]
    assert len(logged) == 3
    assert logged[0].target == "main.bad_point"
    assert "schema path properties/x/type" in logged[0].detail


def test_invalid_arguments_never_reach_the_worker_and_do_not_count(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    enabled(host, make_plugin)
    for _ in range(4):
        with pytest.raises(LifecycleError, match="do not match its declared args schema"):
            host.call("geo", "main.point", "1", 2)
    assert host.call("geo", "main.count") == 0, "the worker never saw the refused calls"
    assert host.breaker("geo").closed
    assert host.breaker("geo").failures == 0


def test_results_are_bounded_by_the_manifest_limit(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    enabled(host, make_plugin, MODULES + "\n[limits]\nmax_output_kb = 1\n")
    assert host.call("geo", "main.blob", 900) == "a" * 900
    with pytest.raises(PluginCallError, match="over the frame limit of 1024 bytes"):
        host.call("geo", "main.blob", 2000)
    # A size limit refused the result: never counted toward the breaker (issue 15).
    assert host.breaker("geo").failures == 0


def test_the_policy_bounds_the_manifest_limit(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    write(make_plugin, modules=MODULES + "\n[limits]\nmax_output_kb = 4096\n")
    with PluginHost(plugins_dir, state_dir=state_dir, policy=Policy(max_output_kb=2)) as host:
        assert host.enable("geo", consent=True)
        assert len(host.call("geo", "main.blob", 2000)) == 2000
        with pytest.raises(PluginCallError, match="over the frame limit of 2048 bytes"):
            host.call("geo", "main.blob", 3000)


def test_results_nested_too_deep_are_refused(host: PluginHost, make_plugin: PluginFactory) -> None:
    enabled(host, make_plugin)
    assert host.call("geo", "main.deep", 60) is not None
    with pytest.raises(PluginCallError, match="nested deeper than 64 levels"):
        host.call("geo", "main.deep", 70)
    assert host.breaker("geo").failures == 1


def test_policy_output_limit() -> None:
    policy = Policy(max_output_kb=1024, max_frame_bytes=8 * 1024 * 1024)
    assert policy.max_output_bytes(None) == 1024 * 1024
    assert policy.max_output_bytes(16) == 16 * 1024
    assert policy.max_output_bytes(10_000) == 1024 * 1024
    assert Policy(max_output_kb=100_000).max_output_bytes(None) == 8 * 1024 * 1024


def test_patterns_run_on_a_linear_time_engine(make_plugin: PluginFactory) -> None:
    """A plugin declares the pattern and controls the text it is matched against."""
    from caplet._host._validate import _re2_pattern, _validator_class

    assert _validator_class().VALIDATORS["pattern"].__wrapped__ is _re2_pattern
    modules = '[modules.main.functions.blob]\nreturns = { type = "string", pattern = "^(a+)+$" }\n'
    blob = compile_validators(load_manifest(write(make_plugin, modules=modules)))["main.blob"]
    blob.check_result("aaaa")
    # 40 a's and a b: about 2**40 steps for a backtracking engine, instant on RE2.
    with pytest.raises(InvalidOutputError, match="does not match"):
        blob.check_result("a" * 40 + "b")


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ('{ type = "string", pattern = "(a)\\\\1" }', "is not supported by RE2"),
        (
            '{ type = "object", patternProperties = { "^x" = { type = "integer" } } }',
            "patternProperties is not supported",
        ),
    ],
)
def test_patterns_re2_cannot_run_are_refused(
    make_plugin: PluginFactory, schema: str, problem: str
) -> None:
    directory = write(make_plugin, modules=f"[modules.main.functions.point]\nreturns = {schema}\n")
    with pytest.raises(ManifestError, match=problem):
        compile_validators(load_manifest(directory))


# -- values JSON does not have (issue 13) ----------------------------------------------------

NON_JSON_SOURCE = """
def create_functions(config):
    def number(text):
        return float(text)
    return {"main": {"number": number}}
"""
NON_JSON_MODULES = """
[modules.main.functions.number]
args = { type = "array", prefixItems = [{ type = "string", pattern = "^[a-z]+$" }] }
returns = { type = "number", multipleOf = 0.5 }
"""


@pytest.mark.parametrize("text", ["inf", "nan"])
def test_a_non_json_result_is_invalid_output_not_a_foreign_error(
    host: PluginHost, make_plugin: PluginFactory, text: str
) -> None:
    """jsonschema's multipleOf raises OverflowError for infinity and ValueError for NaN,
    and both cross the channel as msgpack floats: the result is refused like any other
    that breaks its schema, and counted."""
    make_plugin("geo", source=NON_JSON_SOURCE, modules=textwrap.dedent(NON_JSON_MODULES))
    host.discover()
    assert host.enable("geo", consent=True)
    with pytest.raises(InvalidOutputError) as caught:
        host.call("geo", "main.number", text)
    # Refused before jsonschema runs since attack18 (NaN passed minimum and maximum).
    assert (
        f"returned a value that does not match its declared returns schema: at $: {text} is "
        "not a JSON number (NaN and infinity are not JSON)"
    ) in str(caught.value)
    assert host.breaker("geo").failures == 1


def test_an_unpaired_surrogate_argument_is_refused_as_the_callers_mistake(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("geo", source=NON_JSON_SOURCE, modules=textwrap.dedent(NON_JSON_MODULES))
    host.discover()
    assert host.enable("geo", consent=True)
    with pytest.raises(LifecycleError) as caught:
        host.call("geo", "main.number", "a\udc80")
    assert "the arguments of main.number do not match its declared args schema" in str(caught.value)
    assert "(UnicodeEncodeError): NaN, infinity and unpaired surrogates are not JSON" in str(
        caught.value
    )
    assert host.breaker("geo").failures == 0


def test_unique_items_are_checked_in_linear_time(
    host: PluginHost, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team round 5: jsonschema compares every pair of items it cannot sort, in
    the host, after the call's deadline: 8,000 small objects from a plugin that
    declared ``uniqueItems`` held the calling thread for two minutes; the 120,000
    here (0.9 MB, under the 1 MiB result limit) for hours."""
    import jsonschema._utils

    compared: list[object] = []
    real_equal = jsonschema._utils.equal

    def counting_equal(one: object, two: object) -> bool:
        compared.append(one)
        return bool(real_equal(one, two))

    enabled(host, make_plugin)  # (checking the schemas themselves compares a few)
    monkeypatch.setattr(jsonschema._utils, "equal", counting_equal)
    assert len(host.call("geo", "main.distinct", 120_000, False)) == 120_000
    with pytest.raises(InvalidOutputError, match="has non-unique elements: item 120000 equals"):
        host.call("geo", "main.distinct", 120_000, True)
    assert compared == []  # no pairwise comparison at all


@pytest.mark.parametrize(
    "items",
    [
        [1, True],
        [0, False],
        [1, 1.0],
        [True, True],
        [[1], [True]],
        [[1, 2], (1, 2)],
        [b"a", [97]],
        ["a", b"a"],
        [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}],
        [{"a": 1}, {"a": True}],
        [{"a": None}, {"a": 0}],
        [[{"x": [1, {"y": False}]}], [{"x": [1, {"y": 0}]}]],
        [float("nan"), float("nan")],
        [None, None],
        ["x", "y", "x"],
        [[], {}],
    ],
)
def test_unique_items_means_what_jsonschema_means(items: list[object]) -> None:
    from jsonschema._utils import uniq

    from caplet._host._validate import _all_unique

    assert _all_unique(items) == bool(uniq(items))
    nan = float("nan")
    assert not _all_unique([nan, nan])  # one object: equal to itself, as in jsonschema
    assert _all_unique([{1, 2}, {3}]) == bool(uniq([{1, 2}, {3}]))  # no JSON: its own check


def test_enum_is_checked_by_lookup_not_entry_by_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team round 5: a plugin's own manifest holds an enum of 100,000 values and
    its result as many items; each item was compared with every entry in the host."""
    import jsonschema._utils

    from caplet._host._validate import compile_schema

    values = [f"v{n:06d}" for n in range(100_000)]
    validator = compile_schema({"type": "array", "items": {"enum": values}}, _refuse)
    compared: list[object] = []
    real_equal = jsonschema._utils.equal

    def counting_equal(one: object, two: object) -> bool:
        compared.append(one)
        return bool(real_equal(one, two))

    monkeypatch.setattr(jsonschema._utils, "equal", counting_equal)
    assert validator.is_valid([values[-1]] * 100_000)
    assert not validator.is_valid([values[-1], "x"])
    assert compared == []
    # JSON Schema's equality: 1 is 1.0, True is not 1, objects in any key order.
    small = compile_schema({"enum": [1, {"a": [True]}, None]}, _refuse)
    assert small.is_valid(1.0)
    assert not small.is_valid(True)
    assert small.is_valid({"a": (True,)})
    assert not small.is_valid({"a": [1]})
    assert small.is_valid(None)
    assert not small.is_valid({1, 2})  # not JSON: jsonschema's own check


def _refuse(message: str) -> Exception:
    return ValueError(message)


# -- the work budget (red team round 5) -------------------------------------------------------

BUDGET_SOURCE = """
def create_functions(config):
    seen = []

    def empties(count):
        return [{}] * count

    def take(items):
        seen.append(len(items))
        return len(items)

    def taken():
        return len(seen)

    return {"main": {"empties": empties, "take": take, "taken": taken}}
"""
#: A union whose every branch but the last fails on ``{}``: each item tries them all.
BRANCHES = 2_000
UNION = (
    "{ anyOf = ["
    + ", ".join(f'{{ type = "object", required = ["k{n}"] }}' for n in range(BRANCHES))
    + ', { type = "object" }] }'
)
BUDGET_MODULES = f"""
[modules.main.functions.empties]
returns = {{ type = "array", items = {UNION} }}

[modules.main.functions.take]
args = {{ type = "array", prefixItems = [{{ type = "array", items = {UNION} }}] }}

[modules.main.functions.taken]
"""
#: 20,000 items by 2,001 branches: 40 million subschemas entered by the old
#: code (about 7.5 us each on this machine: five minutes), a result of 20 KB.
ITEMS = 20_000
#: Far above what the budget lets through, far below what the old code did.
DESCENT_CAP = 1_000_000


class _TooMuchWorkError(Exception):
    pass


def count_descents(monkeypatch: pytest.MonkeyPatch, cap: int = DESCENT_CAP) -> list[int]:
    """Count the subschemas jsonschema enters (each builds a resolver for it), and stop
    the validation past ``cap`` so that the unbounded code fails the test fast."""
    from referencing._core import Resolver

    counted = [0]
    real = Resolver.in_subresource

    def counting(self: Resolver[Any], subresource: Any) -> Resolver[Any]:
        counted[0] += 1
        if counted[0] > cap:
            raise _TooMuchWorkError(f"more than {cap} subschemas entered")
        return real(self, subresource)

    monkeypatch.setattr(Resolver, "in_subresource", counting)
    return counted


def budget_host(host: PluginHost, make_plugin: PluginFactory) -> PluginHost:
    make_plugin("geo", source=BUDGET_SOURCE, modules=BUDGET_MODULES)
    host.discover()
    outcome = host.enable("geo", consent=True)
    assert outcome, outcome.reason
    return host


def test_a_result_that_multiplies_its_schema_is_refused_within_a_work_budget(
    host: PluginHost, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team round 5: a plugin's own manifest declares a union of 2,000 branches,
    its result holds 20,000 items, and the host tried every branch on every item
    after the call's deadline (a 1 MiB manifest and a 1 MiB result: days)."""
    budget_host(host, make_plugin)
    # A couple of items fit the budget's constant: the schema is usable, not refused.
    assert host.call("geo", "main.empties", 2) == [{}] * 2
    descents = count_descents(monkeypatch)
    with pytest.raises(InvalidOutputError) as caught:
        host.call("geo", "main.empties", ITEMS)
    assert 0 < descents[0] < DESCENT_CAP
    message = str(caught.value)
    assert message.startswith(
        "plugin 'geo': main.empties returned a value that does not match its declared "
        "returns schema: at $: checking the value against the schema took more than its "
        "work budget (2,100,100 units for a value of size 20,001: 100,000 + 100 per value, "
        "object key or 64 characters); the value is refused unchecked: simplify the schema "
        "(fewer anyOf/oneOf branches tried on every item, less nesting and $ref recursion) "
        "(schema path /, "
    )
    assert "field modules.main.functions.empties.returns); fix the plugin or its schema" in (
        message
    )
    assert host.breaker("geo").failures == 1  # the plugin's failure: it counts


def test_arguments_that_multiply_the_schema_are_refused_before_the_worker(
    host: PluginHost, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through ``args``: what a caller (or a guest) sends is checked in the host."""
    budget_host(host, make_plugin)
    assert host.call("geo", "main.take", [{}] * 2) == 2
    descents = count_descents(monkeypatch)
    with pytest.raises(LifecycleError) as caught:
        host.call("geo", "main.take", [{}] * ITEMS)
    assert 0 < descents[0] < DESCENT_CAP
    assert (
        "plugin 'geo': the arguments of main.take do not match its declared args schema: at "
        "$: checking the value against the schema took more than its work budget (2,100,200 "
        "units for a value of size 20,002:"
    ) in str(caught.value)
    assert "simplify the schema" in str(caught.value)
    monkeypatch.undo()
    assert host.call("geo", "main.taken") == 1, "the refused call never reached the worker"
    assert host.breaker("geo").failures == 0


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        # Thousands of empty subschemas: no keyword in them, each still entered.
        ({"type": "array", "items": {"allOf": [{}] * 3_000}}, [0] * 3_000),
        # A linear keyword (round 5) applied by every branch to the whole array.
        (
            {"anyOf": [{"uniqueItems": True, "minItems": 10**9}] * 3_000 + [{"type": "array"}]},
            list(range(3_000)),
        ),
        # A property list looped over for every item, no subschema entered (an
        # error for each: the pass that finds the most relevant one collects them).
        (
            {"type": "array", "items": {"required": [f"k{n}" for n in range(1_000)]}},
            [{}] * 1_000,
        ),
    ],
)
def test_every_shape_of_multiplication_is_charged(
    schema: dict[str, Any], value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each costs a million steps or more the old way (9 million subschemas, 9 million
    item keys, a million errors) and is refused after the budget. ``first_error`` is
    what every check goes through (manifest schemas, ``ctx.app`` schemas, hook
    payloads)."""
    from caplet._host._schema_budget import WORK_BASE, WORK_PER_UNIT
    from caplet._host._validate import compile_schema, first_error

    validator = compile_schema(schema, _refuse)
    descents = count_descents(monkeypatch)
    problem = first_error(validator, value)
    assert descents[0] < DESCENT_CAP
    assert problem is not None
    where, message, schema_path = problem
    assert (where, schema_path) == ("$", "/")
    assert "took more than its work budget" in message
    assert f"{WORK_BASE:,} + {WORK_PER_UNIT} per value" in message


def test_the_budget_grows_with_the_value_and_honest_unions_pass() -> None:
    from caplet._host._schema_budget import value_size
    from caplet._host._validate import compile_schema, first_error

    # A tagged union of four object shapes on 50,000 items (the kind of schema a
    # plugin declares), valid and invalid: checked in full, a precise error.
    shapes = [
        {
            "type": "object",
            "required": ["kind", "value"],
            "properties": {"kind": {"const": kind}, "value": {"type": typ}},
            "additionalProperties": False,
        }
        for kind, typ in [("a", "integer"), ("b", "string"), ("c", "boolean"), ("d", "array")]
    ]
    validator = compile_schema({"type": "array", "items": {"anyOf": shapes}}, _refuse)
    items = [{"kind": "d", "value": [n]} for n in range(50_000)]
    assert first_error(validator, items) is None
    where, message, _ = first_error(validator, [*items, {"kind": "d", "value": 1}]) or ("", "", "")
    assert where == "$[50000]"
    assert "is not valid under any of the given schemas" in message
    assert value_size(items) == 1 + 50_000 * (1 + 2 + 1 + 2)
    assert value_size("x" * 640) == 11
    assert value_size({"k" * 128: None}) == 1 + 3 + 1


def test_a_dialect_inside_a_schema_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonschema validates a subschema that names ``$schema`` with that dialect's own
    validator class: jsonschema's pairwise uniqueItems, stdlib re for patterns, no
    budget. The root's is removed once checked (a ``$ref`` to ``#`` enters it)."""
    import jsonschema._utils

    from caplet._host._validate import compile_schema

    compared: list[object] = []
    real_equal = jsonschema._utils.equal

    def counting_equal(one: object, two: object) -> bool:
        compared.append(one)
        return bool(real_equal(one, two))

    inner = {"$schema": "https://json-schema.org/draft/2020-12/schema", "uniqueItems": True}
    with pytest.raises(ValueError, match=r"\$schema is allowed only at the top of the schema"):
        compile_schema({"type": "array", "items": inner}, _refuse)
    unique = {"uniqueItems": True}
    root = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "anyOf": [{"type": "array", "items": {"$ref": "#"}}, unique],
    }
    validator = compile_schema(root, _refuse)
    monkeypatch.setattr(jsonschema._utils, "equal", counting_equal)
    assert validator.is_valid([[{"n": n} for n in range(300)]])
    assert compared == []  # the root's dialect never switched the validator class


def test_a_schema_nested_too_deep_is_refused_at_enable(make_plugin: PluginFactory) -> None:
    from caplet._host._validate import MAX_SCHEMA_DEPTH, compile_schema

    def nested(levels: int) -> dict[str, Any]:
        schema: dict[str, Any] = {}
        for _ in range(levels - 1):
            schema = {"items": schema}
        return schema

    assert compile_schema(nested(MAX_SCHEMA_DEPTH), _refuse).is_valid([[[]]])
    # Deeper used to be a RecursionError (a traceback) while enabling the plugin.
    with pytest.raises(ValueError, match="nested more than 64 levels deep; flatten it"):
        compile_schema(nested(MAX_SCHEMA_DEPTH + 1), _refuse)
    with pytest.raises(ValueError, match="nested more than 64 levels deep"):
        compile_schema(nested(5_000), _refuse)


BOUNDED_SOURCE = """
def create_functions(config):
    def scale(percent):
        return {"percent": percent}
    def ratio(text):
        return {"ratio": float(text)}
    return {"main": {"scale": scale, "ratio": ratio}}
"""
BOUNDED_MODULES = """
[modules.main.functions.scale]
args = { type = "array", prefixItems = [{ type = "number", minimum = 0, maximum = 100 }] }
[modules.main.functions.ratio]
returns = { type = "object", properties = { ratio = { type = "number", maximum = 1 } } }
"""


def test_nan_never_passes_a_bound_it_cannot_be_compared_with(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """attack18: jsonschema's minimum and maximum compare (``instance > maximum``), and
    every comparison with NaN is false: ``{type = "number", minimum = 0, maximum = 100}``
    took NaN (from an application, or guest code: a msgpack float), and a returns schema's
    ``maximum = 1`` let a plugin hand NaN on. Only multipleOf raised for it (issue 13)."""
    make_plugin("geo", source=BOUNDED_SOURCE, modules=textwrap.dedent(BOUNDED_MODULES))
    host.discover()
    assert host.enable("geo", consent=True)
    with pytest.raises(LifecycleError) as caught:
        host.call("geo", "main.scale", float("nan"))
    assert (
        "do not match its declared args schema: at $[0]: nan is not a JSON number (NaN and "
        "infinity are not JSON)"
    ) in str(caught.value)
    assert host.breaker("geo").failures == 0
    with pytest.raises(InvalidOutputError) as refused:
        host.call("geo", "main.ratio", "nan")
    assert "at $.ratio: nan is not a JSON number (NaN and infinity are not JSON)" in str(
        refused.value
    )
    # Near miss: numbers within the bounds pass.
    assert host.call("geo", "main.scale", 100) == {"percent": 100}
    assert host.call("geo", "main.ratio", "0.5") == {"ratio": 0.5}
