"""A scripted ``ContextTransport`` for driving ``ctx`` without a worker."""

from __future__ import annotations

from caplet._sandbox._protocol import ContextGrants, ContextOp, WireValue


class FakeTransport:
    """Records requests and answers from a script."""

    def __init__(self, *answers: WireValue) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[ContextOp, dict[str, WireValue]]] = []
        self.in_call = True

    def request(self, op: ContextOp, args: dict[str, WireValue]) -> WireValue:
        self.sent.append((op, args))
        return self.answers.pop(0) if self.answers else None


ALL = ContextGrants(http=True, apps=("email.send",), modules=("fsread",))
