"""Property tests of the capability parser: only CapabilityError; normal forms are fixed points."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from caplet._capabilities._parse import parse_capability
from caplet._errors import CapabilityError
from tests._fuzz.budget import fuzz

KINDS = ("fs.read:", "fs.write:", "net.http:", "env.read:", "proc.exec:", "host.call:", "app:")

#: Values that look like what each kind takes, so the parser gets past the prefix.
values = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="abcdefgh/._-*~${}:?#[]@%0123456789ABCDEF", max_size=60),
    st.builds(
        lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
        st.sampled_from(["http", "https", "ftp", "HTTPS", ""]),
        st.text(alphabet="abcxyz.-*[]:0123456789", max_size=20),
        st.sampled_from(["", ":0", ":443", ":65536", ":x"]),
        st.text(alphabet="/abc.%2eE?#", max_size=15),
    ),
)
capability_text = st.one_of(
    st.text(max_size=80),
    st.builds(lambda kind, value: kind + value, st.sampled_from(KINDS), values),
)


def _parsed(text: str, **options: object) -> object:
    try:
        return parse_capability(text, **options)  # type: ignore[arg-type]
    except CapabilityError:
        return None


@fuzz(200)
@given(capability_text)
def test_the_parser_raises_only_capability_error(text: str) -> None:
    capability = _parsed(text)
    if capability is not None:
        # The normal form parses back to an equal capability, and is its own normal form.
        again = parse_capability(str(capability))
        assert again == capability
        assert str(again) == str(capability)


@fuzz(100)
@given(capability_text, st.lists(st.sampled_from(["root", "url", "name"]), max_size=3))
def test_templates_and_broad_paths_raise_only_capability_error(text: str, names: list[str]) -> None:
    for allow_broad in (False, True):
        _parsed(text, config_names=names, allow_broad=allow_broad)


@fuzz(100)
@given(st.sampled_from(KINDS), values)
def test_a_refusal_names_what_was_given(kind: str, value: str) -> None:
    message = "parsed"
    try:
        parse_capability(kind + value)
    except CapabilityError as exc:
        message = str(exc)
    assert message, "a refusal must say why"
