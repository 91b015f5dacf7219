"""The worker tests' plugin: one function returning each kind of value the channel carries."""

from __future__ import annotations

VALUES = """
def create_functions(config):
    def run(kind):
        return {
            "str": "héllo",
            "nested": {"a": [1, 2.5, {"b": None}], "t": (True, False)},
            "bytes": b"\\x00\\xff",
            "none": None,
            "bigint": 2**63,
            "negative": -(2**63),
        }[kind]
    return {"demo": {"run": run}}
"""
