"""The host tests' plugin: a function each for its pid, a spin, a crash and an exception."""

from __future__ import annotations

SPIN = """
import os

def create_functions(config):
    def spin():
        while True:
            pass

    def crash():
        os._exit(7)

    def boom(message):
        raise ValueError(message)

    def pid():
        return os.getpid()

    return {"main": {"spin": spin, "crash": crash, "boom": boom, "pid": pid}}
"""
SPIN_MODULES = (
    '[modules.main]\nfunctions = ["spin", "crash", "boom", "pid"]\n[limits]\ntimeout_ms = 400\n'
)
