"""No epoll watches held against the worker's uid (attack10).

``fs.epoll.max_user_watches`` is a count per user in the kernel's
``user_struct`` (fs/eventpoll.c), not a user-namespace count: no
``/proc/sys/user`` limit of a jail bounds it, and every process of the
worker's real uid shares it. A root host's workers granted ``proc.exec``
share one real uid (every other worker has its own: caplet._sandbox._identity),
an unprivileged host's run as the host's own user. A watch stays registered while its
file lives, whatever happens to the descriptor that named it, so
a worker keeps registering one file under every descriptor number it frees:
epoll instances x files x descriptor numbers, 200,000 watches in a third of a
second and ``max_user_watches`` (4% of RAM in kernel memory, 5.5 million
here) within seconds; then ``epoll_ctl`` fails with ENOSPC for every other
process of that uid (asyncio's event loop cannot start: the host's own, an
``AsyncPluginHost``'s, ``caplet mcp --http``'s, another plugin's).

A worker that cannot exec gets no epoll instance (seccomp) and its Python
waits with poll(2) instead (``selectors.DefaultSelector`` is the poll
selector, so asyncio works as before). A worker granted ``proc.exec`` keeps
epoll: Go programs abort without it (``runtime: netpollinit failed``), and so
do Node and other event loops; that remainder is the strict xfail below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._sandbox._seccomp_numbers import syscall_number
from tests._sandbox.seccompkit import call, sandboxed_host, write_plugin

#: How many watches the attack tries to hold: enough to show the amplification
#: (far more than its 256 descriptors), cheap for the kernel (a few MiB).
TRIED = 20_000

SOURCE = """
import asyncio, select, selectors


def hoard(epoll_create1, tried):
    out = {"raw epoll_create1": raw(epoll_create1, 0)}
    out["select has epoll"] = hasattr(select, "epoll")
    out["default selector"] = selectors.DefaultSelector.__name__

    async def main():
        loop = asyncio.get_running_loop()
        total = await loop.run_in_executor(None, sum, [1, 2, 3])
        await asyncio.sleep(0)
        return total

    out["asyncio"] = asyncio.run(main())
    # The attack: one epoll instance, a few pipes, every free descriptor number.
    held = 0
    try:
        instances = [select.epoll() for _ in range(8)]
    except (AttributeError, OSError) as exc:
        out["epoll"] = type(exc).__name__
        instances = []
    if instances:
        targets = []
        for _ in range(8):
            read_end, write_end = os.pipe()
            os.close(write_end)
            targets.append(read_end)
        free = [n for n in range(64, 250)]
        for instance in instances:
            for target in targets:
                for number in free:
                    if held >= tried:
                        break
                    os.dup2(target, number)
                    instance.register(number, select.EPOLLIN)
                    os.close(number)
                    held += 1
    out["held"] = held
    return out
"""

EXEC_SOURCE = """
def probe(epoll_create1):
    return raw(epoll_create1, 0)
"""


def _epoll_create1() -> int:
    number = syscall_number("epoll_create1", os.uname().machine)
    assert number is not None
    return number


def test_a_worker_holds_no_epoll_watches_and_asyncio_still_works(
    plugins_dir: Path, state_dir: Path
) -> None:
    write_plugin(plugins_dir, "hoarder", SOURCE, ("hoard",))
    with sandboxed_host(plugins_dir, state_dir, "hoarder") as host:
        out = call(host, "hoarder", "hoard", _epoll_create1(), TRIED)
    assert out["raw epoll_create1"] == "EPERM", out
    assert out["held"] == 0, out
    assert out["select has epoll"] is False, out
    assert out["epoll"] == "AttributeError", out
    # What asyncio and selectors use instead: poll(2), which holds nothing
    # once the call returns.
    assert out["default selector"] == "PollSelector", out
    assert out["asyncio"] == 6, out


@pytest.mark.xfail(
    strict=True,
    reason="a worker granted proc.exec keeps epoll: the programs it runs (Go, Node) need it; "
    "docs/security.md, attack10",
)
def test_a_worker_that_may_exec_holds_no_epoll_watches_either(
    plugins_dir: Path, state_dir: Path
) -> None:
    write_plugin(
        plugins_dir, "runner", EXEC_SOURCE, ("probe",), capabilities=("proc.exec:/usr/bin/true",)
    )
    with sandboxed_host(plugins_dir, state_dir, "runner") as host:
        assert call(host, "runner", "probe", _epoll_create1()) == "EPERM"
