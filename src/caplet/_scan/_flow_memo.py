"""An exact memo for the data flow's recursive label questions (issue 16 point 4).

The labels of a node are computed from the labels of the nodes its value comes from,
and code can make those dependencies cyclic (``a = b; b = a + x``) and deep. The old memo
stored a placeholder for a node while computing it ("a cycle through this node adds
nothing") and then kept for good what was computed while that cut was in force: a
node's answer depended on whether it was first asked directly or in the middle of
another node's walk, so no rule could skip a question without changing the answers of
later ones (a skipped lookup key added a CPL-THR-001 in the stdlib's modulefinder.py).

Here every question is answered as if it were asked first, whatever was asked before:

* the frames in progress are numbered; a computation that meets one (a cycle) notes the
  lowest it met (Tarjan's low link). A frame whose computation met none below itself is
  the root of its strongly connected component: its answer (the component entered at
  it) is kept for good, and so are its members' when every label of the component is a
  union of its parts (then each member reaches what the root reaches, so its answer
  is the root's). A component where some label *filters* a part still in progress (one
  entry of the environment drops the whole environment) keeps its members' answers for
  the question only;
* a node past the depth bound is *deferred*: the question's frames above it are kept for
  the question only, the deferred node is then asked as a question of its own (from
  depth 0, kept for good when exact; its own deferred nodes first) and the first
  question asked again, as long as each round keeps more answers for good;
* each question has its own step budget, so one costly question does not empty the
  answers of those asked after it; a per-file budget bounds the sum. Past a spent
  budget a frame is computed as before the exact memo (each node once more at most), so
  crafted code can make answers incomplete or order-dependent, never slow and never
  empty for what follows (attack9). Only a spent budget (counted in :data:`CUTS`)
  leaves an answer that depends on what was asked before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["CUTS", "FILE_STEPS", "QUESTION_STEPS", "ExactMemo", "OverBudgetError"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_A = TypeVar("_A")

#: How often each bound fired, for all files of this process (the benchmarks print it:
#: ``benchmarks/flow_cuts.py``): "cycle" (a frame in progress met again: exact),
#: "filtered" (a component whose members keep their answers for the question only),
#: "depth" (a node deferred), "rounds" (deferred nodes left after the last round),
#: "question budget", "file budget" (a frame computed past a spent budget, as before
#: the exact memo: see :meth:`ExactMemo._spent`).
CUTS: Counter[str] = Counter()

#: Frames one question may compute (its deferred rounds included).
QUESTION_STEPS = 20_000
#: Frames all questions of one file may compute.
FILE_STEPS = 150_000
#: Deferred nodes one question may have waiting at once.
_MAX_DEFERRED = 1_024

_NOT_LOW = 1 << 30


class OverBudgetError(Exception):
    """A question's or the file's step budget is spent (caught at the question's entry)."""


class ExactMemo:
    """The memo and the bounds of one file's label questions (a mixin of
    :class:`caplet._scan._flow.Flow`)."""

    def __init__(self) -> None:
        #: Frames in progress: their key and number (in the order they were entered).
        self._open: dict[Hashable, int] = {}
        #: The lowest frame in progress the current frame's computation met.
        self._low = _NOT_LOW
        #: Whether the current frame's answer holds only for this question.
        self._inexact = False
        #: Whether the current component filters a part still in progress.
        self._filtered = False
        #: Members of components still open (their memo and key): the roots decide.
        self._members: list[tuple[dict[Any, Any], Hashable]] = []
        #: This question's answers not kept for good: value, low link, exactness.
        self._temp: dict[Hashable, tuple[Any, int, bool]] = {}
        #: Nodes met past the depth bound in this question (asked again from depth 0).
        self._deferred: list[Callable[[], object]] = []
        #: Frames entered in this question (the next frame's number).
        self._entered = 0
        self._question_steps = 0
        self._file_steps = 0

    # -- one question ----------------------------------------------------------------

    def question(self, ask: Callable[[], _V], empty: _V) -> _V:
        """``ask()`` as one question: exact unless a budget is spent (then its last
        answer, truncated at the depth bound, or ``empty``) or deferred nodes are left
        that no round could make exact (a cycle longer than the bound).

        A question asked inside another (a resolution asking labels) belongs to it.
        """
        if self._open:
            return ask()
        self._question_steps = 0
        # the question and the deferred nodes to ask first, each with how many answers
        # were kept for good at its last attempt (asked again only after progress)
        work: list[tuple[Callable[[], object], int]] = [(ask, -1)]
        answer = empty
        try:
            while work:
                again, last = work[-1]
                kept = self._kept()
                if kept == last:
                    CUTS["rounds"] += 1  # a cycle longer than the bound: truncated
                    work.pop()
                    continue
                result = again()
                deferred = self._deferred
                self._reset()
                if len(work) == 1:
                    answer = result  # type: ignore[assignment]
                if deferred and len(work) < _MAX_DEFERRED:
                    # the deepest first: each kept for good lets the ones above it finish
                    work[-1] = (again, kept)
                    work.extend((d, -1) for d in deferred)
                else:
                    work.pop()
            return answer
        except OverBudgetError:
            # the last answer the question itself gave (truncated at the depth bound,
            # as every answer was before), else nothing
            return answer
        finally:
            self._reset()

    def _reset(self) -> None:
        self._open.clear()
        self._entered = 0
        self._low = _NOT_LOW
        self._inexact = False
        self._filtered = False
        self._members.clear()
        self._temp.clear()
        self._deferred = []

    def _kept(self) -> int:
        """How many answers are kept for good (a deferred round made progress if more)."""
        raise NotImplementedError

    # -- one frame -------------------------------------------------------------------

    def memoised(
        self,
        memo: dict[_K, _V],
        key: _K,
        empty: _V,
        compute: Callable[[_A, int], _V],
        *,
        node: _A,
        depth: int,
    ) -> _V:
        """``memo[key]``, computed by ``compute(node, depth)`` when it is not known and kept for
        good only when exact (see the module docstring). The answer must be the union
        of its parts' (where a frame filters a part, it says so: :meth:`filters`)."""
        cached = memo.get(key)
        if cached is not None:
            return cached
        index = self._open.get(key)
        if index is not None:
            CUTS["cycle"] += 1
            self._low = min(self._low, index)
            return empty
        temp = self._temp.get(key)
        if temp is not None:
            value, low, inexact = temp
            self._low = min(self._low, low)
            if inexact:
                self._inexact = True
            found: _V = value
            return found
        if self._question_steps >= QUESTION_STEPS or self._file_steps >= FILE_STEPS:
            return self._spent(memo, key, compute, node, depth)
        self._question_steps += 1
        self._file_steps += 1
        outer_low, outer_inexact, outer_filtered = self._low, self._inexact, self._filtered
        # numbered in the order entered, never reused: a member of a component still
        # open notes the number of a frame that may have finished since (Tarjan's index)
        index = self._entered
        self._entered += 1
        self._open[key] = index
        self._low, self._inexact, self._filtered = _NOT_LOW, False, False
        mark = len(self._members)
        try:
            # the arguments passed on, not a closure: a frame fewer for each link of a
            # chain of names (the interpreter's recursion limit is shared with resolve)
            value = compute(node, depth)
        finally:
            self._open.pop(key, None)
        low, inexact, filtered = self._low, self._inexact, self._filtered
        if low >= index:
            # the root of its component (alone, or the component entered here): its
            # answer is the component's entered here, whatever was asked before
            members = self._members[mark:]
            del self._members[mark:]
            if inexact or filtered:
                # entered elsewhere, a filtering component answers otherwise: for this
                # question only (a later member's question would read this root's)
                self._temp[key] = (value, _NOT_LOW, True)
                inexact = True  # and so is every frame that reads it
            else:
                memo[key] = value
            for member_memo, member in members:
                if inexact or filtered:
                    kept = self._temp[member]
                    self._temp[member] = (kept[0], _NOT_LOW, True)
                else:
                    # a union over a component: each member reaches what the root does
                    member_memo[member] = value
                    del self._temp[member]
            low, filtered = _NOT_LOW, False
        else:
            self._temp[key] = (value, low, inexact)
            self._members.append((memo, key))
        self._low = min(outer_low, low)
        self._inexact = outer_inexact or inexact
        self._filtered = outer_filtered or filtered
        return value

    def _spent(
        self,
        memo: dict[_K, _V],
        key: _K,
        compute: Callable[[_A, int], _V],
        node: _A,
        depth: int,
    ) -> _V:
        """A frame past a spent budget, computed as before the exact memo: a cycle adds
        nothing, its answer kept for good (each node computed once more at most, so
        crafted code stays linear) and every frame above it holds for this question only.

        Answered empty instead (attack9), 2,000 uses of a cycle longer than the depth
        bound spent the file's budget and every later question with it: an environment
        posted and a decoded exec after them were no DANGER, which 51d254d reported.
        An answer that depends on what was asked before is the smaller evil."""
        CUTS["question budget" if self._question_steps >= QUESTION_STEPS else "file budget"] += 1
        self._inexact = True
        index = self._entered
        self._entered += 1
        self._open[key] = index
        try:
            value = compute(node, depth)
        finally:
            self._open.pop(key, None)
        memo[key] = value
        self._inexact = True
        return value

    def too_deep(self, again: Callable[[], object]) -> None:
        """A node past the depth bound: the frames above it hold for this question only,
        and ``again()`` asks it from depth 0 before the question is asked again."""
        CUTS["depth"] += 1
        self._inexact = True
        if self._question_steps < QUESTION_STEPS and self._file_steps < FILE_STEPS:
            # (past a spent budget: truncated at the bound, as before the exact memo)
            self._deferred.append(again)

    def final(self, ask: Callable[[], _V]) -> tuple[_V, bool]:
        """``ask()``, and whether its answer is final: not a part of a component still
        in progress, nor an answer for this question only."""
        outer_low, outer_inexact = self._low, self._inexact
        self._low, self._inexact = _NOT_LOW, False
        try:
            value = ask()
        finally:
            low, inexact = self._low, self._inexact
            self._low = min(outer_low, low)
            self._inexact = outer_inexact or inexact
        return value, low == _NOT_LOW and not inexact

    def filters(self, final: bool) -> None:
        """The current frame keeps or drops a part's labels by what they are: when the
        part is not final, its component's members do not share the root's answer."""
        if not final:
            CUTS["filtered"] += 1
            self._filtered = True
