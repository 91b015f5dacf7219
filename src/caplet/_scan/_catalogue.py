"""The rule catalogue: ``caplet scan --rules`` and docs/rules.md, from the rule table.

Both are generated from :data:`caplet._scan._rules.RULES` and the worked
examples of :mod:`caplet._scan._examples`, so the documentation cannot drift
from what the scanner does: a test compares docs/rules.md with
:func:`rules_markdown`, and the examples shown are the ones the tests and
the self-check scan. Regenerate the page with::

    python -m caplet._scan._catalogue > docs/rules.md
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from typing import Final, assert_never

from caplet._findings import Severity
from caplet._scan._examples import GAPS, FileTree, Link, RuleExample, Variant, example
from caplet._scan._model import ScanMode
from caplet._scan._rules import RULES, Rule, RuleFamily, RuleKind

__all__ = ["REGENERATE", "RuleRow", "main", "rules_markdown", "rules_table"]

#: The command that rewrites docs/rules.md (quoted by the test that checks it).
REGENERATE: Final = "python -m caplet._scan._catalogue > docs/rules.md"


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One line of ``caplet scan --rules``."""

    rule_id: str
    family: RuleFamily
    kind: RuleKind
    severity: Severity
    rationale: str


def _ordered() -> list[Rule]:
    """Rules grouped by family (in the enum's order), table order within a family."""
    families = list(RuleFamily)
    return sorted(RULES.values(), key=lambda r: families.index(r.family))


def rules_table() -> tuple[RuleRow, ...]:
    """Every rule with its family, kind, uncovered severity and one-line rationale."""
    return tuple(RuleRow(r.rule_id, r.family, r.kind, r.severity, r.rationale) for r in _ordered())


# -- markdown ------------------------------------------------------------------------------


def _family_title(family: RuleFamily) -> str:
    match family:
        case RuleFamily.PROCESS:
            return "Process execution"
        case RuleFamily.DYNAMIC_CODE:
            return "Dynamic code"
        case RuleFamily.NATIVE:
            return "Native code"
        case RuleFamily.INTROSPECTION:
            return "Introspection escapes"
        case RuleFamily.GLOBAL_MUTATION:
            return "Global mutation"
        case RuleFamily.NETWORK:
            return "Network"
        case RuleFamily.FILESYSTEM:
            return "Filesystem"
        case RuleFamily.ENVIRONMENT:
            return "Environment"
        case RuleFamily.OBFUSCATION:
            return "Obfuscation"
        case RuleFamily.INSTALL_HOOK:
            return "Install-time hooks and archives"
        case RuleFamily.SUPPLY_CHAIN:
            return "Supply chain and manifest"
        case RuleFamily.PERSISTENCE:
            return "Persistence"
        case RuleFamily.EXFILTRATION:
            return "Exfiltration"
        case RuleFamily.MINING:
            return "Crypto-mining"
        case RuleFamily.SCANNER:
            return "The scan itself"
        case RuleFamily.MITIGATION:
            return "Mitigations"
        case RuleFamily.AUDITOR:
            return "Text aimed at the auditor"
        case _:
            assert_never(family)


def _severity_text(r: Rule) -> str:
    """How bad a finding of ``r`` is in each mode, and what lowers it."""
    match r.kind:
        case RuleKind.CAPABILITY:
            text = f"**{r.severity.value}** in a plugin"
            if r.covered_by is not None and r.covered_severity is not None:
                text += (
                    f" (**{r.covered_severity.value}** when a declared "
                    f"`{r.covered_by.value}` capability covers it)"
                )
            elif r.family is not RuleFamily.SUPPLY_CHAIN:
                text += " (no capability covers it)"
            if r.family is RuleFamily.SUPPLY_CHAIN:
                return text + "; not reported for packages"
            return text + "; **info** in a package (an observed capability)"
        case RuleKind.THREAT | RuleKind.SIGNAL | RuleKind.SCANNER:
            return f"**{r.severity.value}** in plugins and packages alike"
        case RuleKind.MITIGATION:
            return f"**{r.severity.value}**, in plugin reports only"
        case _:
            assert_never(r.kind)


#: Lines longer than this are cut in the page (the examples themselves are not).
_SHOWN_LINE = 160


def _visible(char: str) -> str:
    """``char``, or its escape when it does not show (bidi controls, NUL)."""
    if char.isprintable() or char == "\t":
        return char
    return f"\\u{ord(char):04x}"


def _show_text(text: str) -> str:
    """Source as it can be shown: invisible characters escaped, huge lines cut."""
    lines = []
    for line in text.rstrip("\n").split("\n"):
        shown = "".join(map(_visible, line))
        if len(shown) > _SHOWN_LINE:
            shown = f"{shown[:100]} …  ⟨{len(line):,} characters in all⟩"
        lines.append(shown)
    return "\n".join(lines)


def _show_path(path: str) -> str:
    """A tree path with long components shortened and repeats counted (the PATH_MAX example)."""
    shown: list[str] = []
    parts = path.split("/")
    index = 0
    while index < len(parts):
        part = parts[index]
        count = 1
        while index + count < len(parts) and parts[index + count] == part:
            count += 1
        text = part if len(part) <= 40 else f"{part[:3]}…⟨{len(part)} characters⟩"
        shown.append(text if count == 1 else f"[{text}/ repeated {count} times]")
        index += count
    return "/".join(shown).replace("]/", "]")


def _members(data: bytes) -> list[str]:
    """The members of an archive built by the examples, for the page."""
    if data.startswith(b"PK"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return [f"{i.filename} ({i.file_size:,} bytes)" for i in archive.infolist()]
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return [
            f"{m.name} -> {m.linkname} (symlink)" if m.issym() else f"{m.name} ({m.size:,} bytes)"
            for m in archive.getmembers()
        ]


def _show_tree(tree: FileTree) -> str:
    """A tree as a listing: each file's path, then its text (or what its bytes are)."""
    blocks: list[str] = []
    for path, data in tree:
        name = _show_path(path)
        if isinstance(data, Link):
            blocks.append(f"{name} -> {data.target}  (symlink)")
            continue
        if data.startswith((b"PK\x03\x04", b"\x1f\x8b")):
            kind = "zip archive" if data.startswith(b"PK") else "gzip-compressed tar"
            listing = "\n".join(f"    {m}" for m in _members(data))
            blocks.append(f"{name}  ({kind}, {len(data):,} bytes), members:\n{listing}")
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            blocks.append(f"{name}  ({len(data):,} bytes of binary data)")
            continue
        if not text.isprintable() and not all(c.isprintable() or c in "\n\t" for c in text):
            blocks.append(f"{name}  ({len(data):,} bytes of binary data)")
            continue
        body = _show_text(text)
        if len(body.split("\n")) > 12:
            first = "\n".join(body.split("\n")[:3])
            body = f"{first}\n… ⟨{len(data):,} bytes in all⟩"
        blocks.append(f"--- {name} ---\n{body}")
    return "\n".join(blocks)


def _block(item: RuleExample, variant: Variant) -> str:
    tree = item.tree(variant)
    if tree is not None:
        description = {Variant.BAD: item.bad, Variant.GOOD: item.good}.get(variant, item.alias)
        return f"{_md(description or '')}:\n\n```text\n{_show_tree(tree)}\n```"
    source = item.source(variant)
    assert source is not None
    return f"```python\n{_show_text(source)}\n```"


def _mode_text(item: RuleExample) -> str:
    declared = ", ".join(f"`{c.declared}`" for c in item.capabilities)
    mode = "a plugin" if item.mode is ScanMode.PLUGIN else "a package"
    if item.max_file_bytes is not None:
        mode += f", `max_file_bytes={item.max_file_bytes}`"
    return f"{mode}, declaring {declared}" if declared else mode


def _md(text: str) -> str:
    """Prose with Markdown's special characters escaped (``__globals__``, ``<program>``, ``|``)."""
    for char in "\\`*_|[]":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _rule_section(r: Rule) -> list[str]:
    item = example(r.rule_id)
    lines = [
        f"### {r.rule_id}",
        "",
        f"- Finding: {_md(r.message.format(api='…'))}",
        f"- Kind: {r.kind.value}",
        f"- Severity: {_severity_text(r)}",
        f"- Why: {_md(r.rationale)}",
    ]
    if r.hint:
        lines.append(f"- Fix: {_md(r.hint)}")
    lines += ["", f"Caught (scanned as {_mode_text(item)}):", "", _block(item, Variant.BAD)]
    if item.alias is not None:
        lines += ["", "Caught too, spelled differently:", "", _block(item, Variant.ALIAS)]
    lines += ["", "Not caught (a near miss):", "", _block(item, Variant.GOOD), ""]
    return lines


_INTRO = f"""\
# Scanner rules

<!-- Generated from caplet/_scan/_rules.py and _examples.py; do not edit.
     Regenerate with: {REGENERATE} -->

`caplet scan` reads Python without running it: each file is parsed with `ast`
and its strings are matched against a linear-time RE2 set, so no input can
make a scan slow or crash it (a file too large, too deep or unparsable is
itself a finding). Every rule below has a worked example: code it catches,
the same behaviour spelled differently (an alias, an import under another
name, a name built from pieces), and a near miss it must leave alone. The
test suite scans all three for every rule, and before its first scan each
process checks that every rule still fires on its example (otherwise caplet
refuses to scan: a broken matcher must never look like clean code). In
the examples below, invisible characters are shown as `\\uXXXX` escapes and
lines over {_SHOWN_LINE} characters are cut.

## Modes

- **Plugin** (a plugin with a manifest; `caplet scan` picks it when there is one):
  threats are danger, and so is any *capability* the manifest does not
  declare, because a plugin may only do what it declared. A declared
  capability lowers the finding it covers (`os.environ["TOKEN"]` is danger
  without `env.read:TOKEN` and info with it); capabilities declared but
  never used are reported too.
- **Package** (any other Python code: a directory, an sdist, a wheel):
  only threats and correlated chains are danger. Single capabilities are
  reported as *observed capabilities* (info), because `exec`, `subprocess`,
  `os.environ` and sockets each appear in a large share of benign
  packages. Files with no trace of a threat are not parsed at all (an RE2
  prefilter decides), so signals such as high-entropy strings are only
  reported in files that also hold a threat token.

## Kinds

- **capability**: what the code *can do* (run programs, open sockets, read
  the environment).
- **threat**: a sign of malicious *intent* (decoded data reaching `exec`,
  browser credential paths, webhooks collecting host data, miners,
  persistence, reverse shells): danger everywhere.
- **signal**: weak evidence (an encoded blob, a very long line): a warning,
  never enough to refuse on its own.
- **scanner**: something could not be checked (too large, too deep,
  unreadable): a warning, because unchecked code is not known to be clean.
- **mitigation**: defensive code (symlink checks, traversal guards, size
  caps), shown to the approver as info.

`caplet scan` exits 1 when an uncovered finding at or above `--fail-on` (danger by
default) remains, 0 otherwise; `caplet scan --rules` lists this catalogue.
"""


def rules_markdown() -> str:
    """The text of docs/rules.md."""
    lines = [_INTRO, "## All rules", "", "| Rule | Family | Kind | Severity | Why |"]
    lines.append("|---|---|---|---|---|")
    for row in rules_table():
        anchor = row.rule_id.lower()
        lines.append(
            f"| [{row.rule_id}](#{anchor}) | {row.family.value} | {row.kind.value} "
            f"| {row.severity.value} | {_md(row.rationale)} |"
        )
    lines.append("")
    family: RuleFamily | None = None
    for r in _ordered():
        if r.family is not family:
            family = r.family
            lines += [f"## {_family_title(family)}", ""]
        lines += _rule_section(r)
    lines += [
        "## Known gaps",
        "",
        "Spellings the scanner does not handle yet. Each is a strict expected",
        "failure in the test suite, so the fix that closes it also moves it out",
        "of this list.",
        "",
    ]
    for item in GAPS:
        variant = item.gap_in
        assert variant is not None
        what = "missed" if variant is Variant.ALIAS else "reported although harmless"
        lines += [
            f"- {item.rule_id}, {what}: {item.known_gap}.",
            "",
            _indent(_block(item, variant)),
        ]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.split("\n"))


def main() -> None:
    """Write docs/rules.md's text to standard output."""
    sys.stdout.write(rules_markdown())


if __name__ == "__main__":
    main()
