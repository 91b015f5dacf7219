"""`caplet new NAME`: a plugin folder that validates, scans clean and runs."""

from __future__ import annotations

import re
from pathlib import Path

from caplet._errors import ManifestError
from caplet._manifest._load import load_manifest

__all__ = ["scaffold"]

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
