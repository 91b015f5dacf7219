"""The warm pool's bookkeeping, with fake workers (the real ones: test_guest.py).

The background thread is synchronised with through the pool's own
condition (``wait_for`` with a generous limit that only bounds a failure),
never with sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from caplet._errors import LifecycleError, WorkerStartError
from caplet._host._guest_pool import GuestPool


class Fake:
    """A lease: which start made it, in which thread, and whether it was closed."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.thread = threading.current_thread().name
        self.alive = True
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Starter:
    """Counts starts; ``fail`` makes the next starts raise."""

    def __init__(self) -> None:
        self.made: list[Fake] = []
        self.fail = False
        self.lock = threading.Lock()
        #: Cleared: every start waits for it (to hold a start "under way").
        self.gate = threading.Event()
        self.gate.set()
        #: Set when a start begins.
        self.entered = threading.Event()

    def __call__(self) -> Fake:
        self.entered.set()
        self.gate.wait()
        with self.lock:
            if self.fail:
                raise WorkerStartError("no sandbox today")
            fake = Fake(len(self.made))
            self.made.append(fake)
            return fake


def wait(pool: GuestPool[Fake], predicate: Callable[[], bool]) -> None:
    with pool._cond:
        assert pool._cond.wait_for(predicate, timeout=30), "the pool's thread never got there"


@pytest.fixture
def starter() -> Starter:
    return Starter()


@pytest.fixture
def pool(starter: Starter) -> Iterator[GuestPool[Fake]]:
    guests: GuestPool[Fake] = GuestPool(starter, 2)
    yield guests
    guests.close()


def test_fill_starts_the_missing_workers_in_the_callers_thread(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    assert pool.fill() == 2
    assert [f.thread for f in starter.made] == [threading.current_thread().name] * 2
    assert pool.fill() == 2  # full: nothing more is started
    assert len(starter.made) == 2


def test_each_take_hands_out_a_worker_once_and_refills_in_the_background(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    first, second = pool.take(), pool.take()
    assert first is not second
    assert {first.number, second.number} == {0, 1}
    wait(pool, lambda: len(pool._idle) == 2)
    assert [f.thread for f in starter.made[2:]] == ["caplet-guest-pool"] * 2
    third = pool.take()
    assert third.number not in (first.number, second.number)


def test_fill_waits_for_a_start_under_way_instead_of_starting_another(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    starter.gate.clear()
    starter.entered.clear()
    pool.take()
    assert starter.entered.wait(30)  # the refill is under way, held at the gate
    filled: list[int] = []
    filler = threading.Thread(target=lambda: filled.append(pool.fill()))
    filler.start()
    starter.gate.set()
    filler.join()
    assert filled == [2]
    assert len(starter.made) == 3  # two by the first fill, one refill; none by the second


def test_an_empty_pool_starts_cold_in_the_callers_thread(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    lease = pool.take()
    assert lease.thread == threading.current_thread().name
    wait(pool, lambda: len(pool._idle) == 2)  # then the pool fills itself


def test_discarded_workers_are_closed_and_never_handed_out_again(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    lease = pool.take()
    pool.discard(lease)
    wait(pool, lambda: lease.closed)
    for _ in range(4):
        assert pool.take() is not lease


def test_a_worker_that_died_while_waiting_is_skipped(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    starter.made[0].alive = False
    assert pool.take().number == 1
    wait(pool, lambda: starter.made[0].closed)


def test_a_failed_background_start_pauses_refilling_until_the_next_take(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    starter.fail = True
    pool.take()
    wait(pool, lambda: pool._paused)
    assert pool.last_failure == "no sandbox today"
    assert pool.ready == 1
    pool.take()  # the waiting one
    with pytest.raises(WorkerStartError, match="no sandbox today"):
        pool.take()  # nothing waits: a cold start, and its real error
    starter.fail = False
    assert pool.fill() == 2


def test_close_closes_every_worker_and_refuses_more(
    pool: GuestPool[Fake], starter: Starter
) -> None:
    pool.fill()
    pool.discard(pool.take())
    pool.close()
    wait(pool, lambda: True)
    assert all(f.closed for f in starter.made)
    with pytest.raises(LifecycleError, match="the host is closed"):
        pool.take()
    pool.close()  # idempotent


class SlowToClose(Fake):
    """A lease whose close waits until the test lets it finish."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.closing = threading.Event()
        self.may_finish = threading.Event()

    def close(self) -> None:
        self.closing.set()
        assert self.may_finish.wait(30), "the test never let the close finish"
        super().close()


def test_a_pool_of_size_zero_starts_every_worker_when_asked(starter: Starter) -> None:
    pool: GuestPool[Fake] = GuestPool(starter, 0)
    lease = pool.take()
    assert lease.thread == threading.current_thread().name
    assert pool.fill() == 0
    assert pool._thread is None  # no refilling thread for a pool of size 0
    pool.discard(lease)
    pool.close()  # waits for the worker's close
    assert lease.closed


def test_a_pool_of_size_zero_closes_a_used_worker_after_returning(starter: Starter) -> None:
    slow = SlowToClose(0)
    pool: GuestPool[Fake] = GuestPool(lambda: slow, 0)
    pool.discard(pool.take())  # returns while the close is still under way
    assert slow.closing.wait(30), "the worker was never closed"
    assert not slow.closed
    closing = threading.Thread(target=pool.close)
    closing.start()
    wait(pool, lambda: pool._closed)  # close() has begun; the worker's close still holds
    assert closing.is_alive(), "pool.close() returned before the worker was closed"
    slow.may_finish.set()
    closing.join(30)
    assert not closing.is_alive()
    assert slow.closed
