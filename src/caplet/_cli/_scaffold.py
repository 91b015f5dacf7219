"""`caplet new NAME`: a plugin folder that validates, scans clean and runs; or, with
`--example`, a copy of one of the plugins caplet ships."""

from __future__ import annotations

import re
import shutil
from importlib import resources
from pathlib import Path

from caplet._errors import ManifestError
from caplet._manifest._load import load_manifest
from caplet._suggest import did_you_mean

__all__ = ["bundled_plugins", "copy_bundled", "scaffold"]

_KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")

_MANIFEST = """\
name = "{name}"
version = "0.1.0"
description = "{title}: describe in one line what this plugin does."
# capabilities = ["fs.read:${{config.root}}"]   # declare only what the code needs

[modules.{module}]
description = "What guests get from host.{module}."
functions = ["hello"]

[config.greeting]
type = "string"
description = "How to greet"
default = "Hello"

[hints]
overview = "host.{module}.hello(name) returns a greeting."
"""

_SOURCE = '''\
"""{name}: a caplet plugin.

create_functions(config) runs in the plugin's own worker process. Return
{{module: {{function: callable}}}} for the modules declared in plugin.toml;
anything undeclared is rejected. Arguments and results are JSON-like values.
"""


def create_functions(config):
    greeting = config["greeting"]

    def hello(name):
        if not isinstance(name, str) or len(name) > 200:
            raise ValueError("name must be a string of at most 200 characters")
        return f"{{greeting}}, {{name}}!"

    return {{"{module}": {{"hello": hello}}}}
'''

_README = """\
# {name}

Scaffolded by `caplet new`. Try it:

    caplet call --enable {name} {module}.hello '"world"'
"""


def scaffold(plugins_dir: Path, name: str) -> Path:
    """Create ``plugins_dir/name`` with a manifest, entry module and README."""
    target = plugins_dir / name
    if not _KEBAB.match(name):
        suggestion = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "my-plugin"
        raise ManifestError(
            f"plugin name {name!r} is not kebab-case; use lower-case words joined by hyphens, "
            f"e.g. {suggestion!r}",
            path=str(target),
            field="name",
        )
    module = name.replace("-", "_")
    values = {"name": name, "module": module, "title": name.replace("-", " ").capitalize()}
    try:
        if target.exists():
            raise ManifestError(
                f"{target} already exists; choose another name or remove it first",
                path=str(target),
            )
        target.mkdir(parents=True)
        (target / "plugin.toml").write_text(_MANIFEST.format(**values), encoding="utf-8")
        (target / "plugin.py").write_text(_SOURCE.format(**values), encoding="utf-8")
        (target / "README.md").write_text(_README.format(**values), encoding="utf-8")
    except OSError as exc:  # a name too long for the file system, no permission, a full disk
        raise ManifestError(
            f"cannot create the plugin folder {str(target)[:300]} ({exc.strerror}); check that "
            f"{plugins_dir} is writable, or choose a shorter name",
            path=str(target),
        ) from exc
    load_manifest(target)  # the scaffold must always validate; fail loudly if it ever does not
    return target


def bundled_plugins() -> dict[str, Path]:
    """The plugins caplet ships, by name: the reference plugins (fs-read, fs-write, fetch)
    first, then the examples of ``caplet demo`` (hello, shell-out ...); packaged in the
    wheel, or beside the source tree in a checkout."""
    package = Path(str(resources.files("caplet")))
    repo = Path(__file__).resolve().parents[3]
    found: dict[str, Path] = {}
    for folder in (
        package / "_plugins",
        repo / "plugins",
        package / "_examples" / "plugins",
        repo / "examples" / "plugins",
    ):
        if folder.is_dir():
            for plugin in sorted(folder.iterdir()):
                if (plugin / "plugin.toml").is_file():
                    found.setdefault(plugin.name, plugin)
    return found


def copy_bundled(plugins_dir: Path, name: str) -> Path:
    """Copy the shipped plugin ``name`` into ``plugins_dir`` (which is created if missing)."""
    shipped = bundled_plugins()
    source = shipped.get(name)
    if source is None:
        raise ManifestError(
            f"caplet ships no plugin named {name!r}{did_you_mean(name, shipped)}; the shipped "
            f"plugins are {', '.join(sorted(shipped)) or 'missing from this installation'}",
            field="name",
        )
    target = plugins_dir / name
    if target.exists():
        raise ManifestError(f"{target} already exists; remove it first", path=str(target))
    try:
        plugins_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    except OSError as exc:
        raise ManifestError(
            f"cannot copy {name} into {plugins_dir} ({exc.strerror}); check that it is writable",
            path=str(target),
        ) from exc
    return target
