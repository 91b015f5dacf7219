"""shell-out: deliberately unsafe. It runs shell commands without declaring
proc.exec, so caplet's danger gate refuses to load it; `caplet demo` shows that."""

import subprocess


def create_functions(config):
    def run(command):
        return subprocess.run(command, shell=True, capture_output=True, text=True).stdout

    return {"shell": {"run": run}}
