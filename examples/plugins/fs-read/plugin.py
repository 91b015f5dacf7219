"""fs-read: read text files under one configured root.

The sandbox (not this code) is what confines the plugin to `fs.read:${config.root}`;
the checks below give callers clear errors instead of permission failures.
They raise `caplet.plugin.Refused` subclasses: a refusal of bad input reaches
the caller but does not count toward the plugin's circuit breaker.
"""

import os

from caplet.plugin import Refused


class InvalidPathRefused(Refused, ValueError):
    """The caller passed a path this plugin does not accept."""


class OutsideRootRefused(Refused, PermissionError):
    """The path leads outside the configured root."""


def create_functions(config):
    root = os.path.realpath(config["root"])
    max_bytes = int(config["max_kb"]) * 1024

    def _resolve(relative):
        if not isinstance(relative, str) or "\x00" in relative:
            raise InvalidPathRefused("path must be a string without NUL bytes")
        if os.path.isabs(relative):
            raise InvalidPathRefused(f"path must be relative to the root, got {relative!r}")
        full = os.path.realpath(os.path.join(root, relative))
        if full != root and not full.startswith(root + os.sep):
            raise OutsideRootRefused(f"{relative!r} is outside the configured root")
        return full

    def read_text(path):
        full = _resolve(path)
        size = os.path.getsize(full)
        if size > max_bytes:
            raise InvalidPathRefused(f"{path!r} is {size} bytes, above max_kb={max_bytes // 1024}")
        with open(full, encoding="utf-8") as handle:
            return handle.read()

    def list_dir(path="."):
        return sorted(os.listdir(_resolve(path)))

    return {"files": {"read_text": read_text, "list_dir": list_dir}}
