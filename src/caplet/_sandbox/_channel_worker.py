"""One plugin's worker process and its channel, the host's side (implements ``Worker``).

The same for every launcher: :class:`SubprocessWorker` talks to a worker
over its socket, whatever :class:`~caplet._sandbox._child.ChildProcess`
stands behind it (a plain child or one the zygote forked into its jail).
One call at a time, each within its deadline, with the ``ctx`` requests
of the call answered on the same channel; every failure leaves the host
running and the worker dead and reaped, its stderr's tail quoted.
"""

from __future__ import annotations

import socket
import threading
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import IO, assert_never

from caplet._errors import (
    BrokerError,
    CallCancelledError,
    CallCycleError,
    CallTimeoutError,
    ContextError,
    ContextLimitError,
    ContextUnavailableError,
    PluginCallError,
    ProtocolError,
    SandboxError,
    WorkerCrashedError,
    WorkerGoneError,
    WorkerStartError,
)
from caplet._sandbox._call_wait import answering, take
from caplet._sandbox._child import ChildProcess, describe_status
from caplet._sandbox._frames import (
    FrameReader,
    UnsentFrameError,
    send_frame,
)
from caplet._sandbox._launcher import RequestHandler, StartedWorker, WireValue, WorkerSpec
from caplet._sandbox._protocol import (
    ALLOWED_VALUES,
    HEADER_BYTES,
    ContextRequest,
    Error,
    Fatal,
    Ready,
    Result,
    WorkerMessage,
)
from caplet._sandbox._protocol_decode import (
    decode_worker_message,
)
from caplet._sandbox._protocol_encode import (
    encode_call,
    encode_context_error,
    encode_context_reply,
    encode_shutdown,
)
from caplet._sandbox._worker_death import death_notes, read_tail, tail_text
from caplet._sandbox._worker_start import INIT_REQUEST_ID

__all__ = ["SubprocessWorker"]

#: How long a worker that should be exiting by itself gets before SIGKILL.
_EXIT_GRACE_S = 1.0


class SubprocessWorker:
    """One plugin's worker process and its channel (implements ``Worker``).

    Built by :meth:`SubprocessLauncher.start`. Calls are serialised by a lock
    (the channel carries one request at a time); every failure leaves the
    host running and the worker dead (``alive`` is False) and reaped.
    """

    __slots__ = (
        "_closed",
        "_death",
        "_interrupted",
        "_lock",
        "_log",
        "_next_id",
        "_owner",
        "_process",
        "_reader",
        "_sock",
        "_sock_lock",
        "_spec",
        "_started",
        "_tail",
        "after_first_call",
    )

    def __init__(
        self,
        spec: WorkerSpec,
        process: ChildProcess,
        sock: socket.socket,
        log: IO[bytes],
    ) -> None:
        self._spec = spec
        self._process = process
        self._sock = sock
        self._log = log
        self._lock = threading.Lock()
        #: Called once, when the first call has ended (whatever its outcome) or at
        #: close if none came: the sandbox launcher's "this start is over", after
        #: which its zygote prepares the next spare (see :data:`caplet._sandbox.
        #: _zygote_request.REFILL`).
        self.after_first_call: Callable[[], None] | None = None
        #: The thread whose call holds the lock (a re-entrant call would deadlock).
        self._owner: int | None = None
        self._next_id = INIT_REQUEST_ID + 1
        self._started = StartedWorker(registered=types.MappingProxyType({}), rejected=())
        self._death: str | None = None  # how it ended, once it has
        self._tail = ""
        self._closed = False
        #: Set by interrupt(): the call in flight was cancelled by its caller.
        self._interrupted = False
        #: Orders interrupt()'s shutdown of the socket against _terminate's close of it.
        self._sock_lock = threading.Lock()
        # Non-blocking, so every send and receive waits in poll() against the
        # call's deadline: a worker that stops reading cannot hang the host.
        sock.setblocking(False)
        self._reader = FrameReader(sock, max_frame_bytes=spec.max_frame_bytes)

    # -- Worker protocol ----------------------------------------------------------

    @property
    def pid(self) -> int:
        """The worker's process id (also its process-group and session id)."""
        return self._process.pid

    @property
    def started(self) -> StartedWorker:
        """What the worker registered and rejected when it became ready."""
        return self._started

    @property
    def alive(self) -> bool:
        """True while the worker process runs (checked without reaping it)."""
        return self._death is None and not self._process.exited()

    @property
    def denials(self) -> Mapping[str, int]:
        """Syscall name -> times the sandbox denied it; known once the worker has ended."""
        return self._process.denials

    def call(
        self,
        module: str,
        function: str,
        args: Sequence[WireValue],
        kwargs: Mapping[str, WireValue],
        *,
        timeout_s: float,
        on_request: RequestHandler | None = None,
        cancel: threading.Event | None = None,
        wait_s: float | None = None,
    ) -> WireValue:
        """Call ``module.function(*args, **kwargs)`` in the worker.

        Raises PluginCallError when the function raised, CallTimeoutError
        (worker killed) past ``timeout_s``, WorkerCrashedError when the
        worker died during this call, its subclass WorkerGoneError when it
        had ended (or was closed) before this call was sent, ProtocolError
        when it broke the protocol (worker killed) -- or, with the worker
        left running, when an argument cannot cross the boundary: that is a
        malformed frame the host refused to send, not a plugin failure.

        While the call runs, each CONTEXT_REQUEST the worker sends is
        answered by ``on_request`` (:meth:`_serve_requests`), inside the
        same deadline; without a handler every request is refused.

        ``wait_s``: the most a nested call waits for other threads' calls, then off
        ``timeout_s``; past it WorkerBusyError, nothing sent (attack31). None: queue.
        """
        # The hot path builds no strings and makes one send and one receive;
        # every failure is explained in _refuse/_failed, off that path.
        thread = threading.get_ident()
        if self._owner == thread:
            # A ctx request handler of this very call (an application handler,
            # say) calling back into the worker that is waiting for its answer.
            raise CallCycleError(
                f"call cycle: plugin '{self._spec.plugin}': {module}.{function} was called "
                "while a call of this thread to the same worker is waiting on a ctx request; "
                "a worker serves one call at a time, so do not call a plugin from the "
                "handling of its own requests",
                plugin=self._spec.plugin,
            )
        timeout_s = take(self._lock, wait_s, timeout_s, self._spec.plugin, (module, function))
        try:
            self._owner = thread
            try:
                if cancel is not None and cancel.is_set():
                    # Checked with the lock held and the owner set, so an interrupt
                    # either finds this call here or the call finds the event set.
                    raise CallCancelledError(
                        f"plugin '{self._spec.plugin}': {module}.{function} was cancelled "
                        "before it was sent; nothing ran"
                    )
                return self._call_locked(
                    module, function, args, kwargs, timeout_s=timeout_s, on_request=on_request
                )
            finally:
                self._owner = None
                if self.after_first_call is not None:
                    self._after_first_call()
        finally:
            self._lock.release()

    def _call_locked(
        self,
        module: str,
        function: str,
        args: Sequence[WireValue],
        kwargs: Mapping[str, WireValue],
        *,
        timeout_s: float,
        on_request: RequestHandler | None,
    ) -> WireValue:
        """The body of :meth:`call`, with the lock held."""
        if self._death is not None or not timeout_s > 0:
            raise self._refuse(module, function, timeout_s)
        request_id = self._next_id
        self._next_id = request_id + 1
        try:
            frame = encode_call(request_id, module, function, args, kwargs)
        except ProtocolError as exc:
            raise ProtocolError(
                f"plugin '{self._spec.plugin}': cannot call {module}.{function}: {exc}; "
                f"pass only {ALLOWED_VALUES}"
            ) from None
        if len(frame) - HEADER_BYTES > self._spec.max_frame_bytes:
            raise ProtocolError(
                f"plugin '{self._spec.plugin}': cannot call {module}.{function}: the "
                f"arguments encode to {len(frame) - HEADER_BYTES} bytes, over the frame "
                f"limit of {self._spec.max_frame_bytes} bytes; pass less data per call"
            )
        try:
            deadline = time.monotonic() + timeout_s
            message = self._exchange(frame, deadline)
            if type(message) is ContextRequest:
                message = self._serve_requests(message, request_id, on_request, deadline)
        except UnsentFrameError:
            if self._interrupted:
                raise self._cancelled(module, function) from None
            # The worker exited while idle (no call was running): nothing of
            # this call ran. Not checked before sending -- that would cost a
            # syscall on every call -- but learnt from the send itself.
            status = self._terminate(grace_s=_EXIT_GRACE_S)
            raise WorkerGoneError(
                f"plugin '{self._spec.plugin}': the worker (pid {self.pid}) had exited "
                f"before {module}.{function} was sent: it {status}{tail_text(self._tail)}; "
                "nothing ran (start a new worker)"
            ) from None
        except TimeoutError:
            self._terminate(grace_s=0.0)
            raise CallTimeoutError(
                f"plugin '{self._spec.plugin}': {module}.{function} timed out after "
                f"{round(timeout_s * 1000)} ms; the worker was killed (if the call "
                "legitimately needs longer, raise its timeout)"
            ) from None
        except ProtocolError as exc:
            self._terminate(grace_s=0.0)
            if self._interrupted:
                raise self._cancelled(module, function) from None
            raise ProtocolError(
                f"plugin '{self._spec.plugin}': {module}.{function}: the worker sent a "
                f"malformed frame ({exc}); the worker was killed"
            ) from exc
        except BaseException:
            # A request handler failed (or the caller was interrupted) half-way
            # through the exchange: the worker's state is unknown, so it goes.
            self._terminate(grace_s=0.0)
            raise
        if type(message) is Result and message.request_id == request_id:
            return message.value
        raise self._failed(module, function, request_id, message)

    def _serve_requests(
        self,
        message: ContextRequest,
        call_id: int,
        on_request: RequestHandler | None,
        deadline: float,
    ) -> WorkerMessage | None:
        """Answer ``ctx`` requests until the worker sends something else; return that.

        A request tagged with another call's id is a request outside its
        call: ProtocolError (the caller kills the worker). Everything the
        handler does happens within the call's deadline: a send that cannot
        finish in time raises TimeoutError like any other part of the call.
        """
        count = 0
        current: WorkerMessage | None = message
        while type(current) is ContextRequest:
            if current.call_id != call_id:
                raise ProtocolError(
                    f"a ctx request tagged with call {current.call_id} arrived while call "
                    f"{call_id} was in flight (ctx requests are only valid during their call)"
                )
            count += 1
            reply = self._answer(current, on_request, deadline, count)
            try:
                send_frame(self._sock, reply, deadline)
                payload = self._reader.read_frame(deadline)
            except (BrokenPipeError, ConnectionResetError):
                return None
            if payload is None:
                return None
            current = decode_worker_message(payload)
        return current

    def _answer(
        self,
        request: ContextRequest,
        on_request: RequestHandler | None,
        deadline: float,
        count: int,
    ) -> bytes:
        """The CONTEXT_REPLY or CONTEXT_ERROR frame for one request."""
        plugin = self._spec.plugin
        what = f"ctx.{request.op.value}"
        try:
            if on_request is None:
                raise ContextUnavailableError(
                    f"unavailable: plugin '{plugin}': {what} was refused because this call "
                    "was made without a request handler (the host serves no ctx requests "
                    "here); call the plugin through PluginHost",
                    plugin=plugin,
                )
            limit = self._spec.max_context_requests
            if count > limit:
                raise ContextLimitError(
                    f"limit exceeded: plugin '{plugin}': {what} refused: more than {limit} ctx "
                    "requests in one call; do fewer requests per call",
                    plugin=plugin,
                )
            with answering(deadline):
                value = on_request(request, deadline)
            try:
                frame = encode_context_reply(request.request_id, value)
            except ProtocolError as exc:
                raise ContextError(
                    f"plugin '{plugin}': the host's answer to {what} cannot cross the "
                    f"boundary ({exc})",
                    plugin=plugin,
                ) from None
            size = len(frame) - HEADER_BYTES
            if size > self._spec.max_frame_bytes:
                raise ContextLimitError(
                    f"limit exceeded: plugin '{plugin}': the answer to {what} encodes to "
                    f"{size} bytes, over the channel limit of {self._spec.max_frame_bytes} "
                    "bytes (the plugin's limits.max_output_kb); ask for less per request",
                    plugin=plugin,
                )
        except (ContextError, BrokerError) as exc:
            return encode_context_error(
                request.request_id, type(exc).__name__, exc.category, str(exc)
            )
        return frame

    def _refuse(self, module: str, function: str, timeout_s: float) -> SandboxError:
        """Why a call is refused before anything is sent."""
        name = f"{module}.{function}"
        if self._death is not None:
            # WorkerGoneError (nothing ran), not a crash of this call: with
            # several threads calling, the others queue on the lock while one
            # call crashes the worker or times out, and each of them must not
            # count as another failure of the plugin.
            reason = "it was closed" if self._closed else f"it {self._death}"
            return WorkerGoneError(
                f"plugin '{self._spec.plugin}': cannot call {name}: the worker "
                f"(pid {self.pid}) is no longer running ({reason}); start a new worker"
            )
        return SandboxError(
            f"plugin '{self._spec.plugin}': cannot call {name}: timeout_s must be a "
            f"positive number of seconds, got {timeout_s!r}"
        )

    def _failed(
        self, module: str, function: str, request_id: int, message: WorkerMessage | None
    ) -> SandboxError:
        """The error for any reply but the expected RESULT (killing when needed)."""
        plugin = self._spec.plugin
        name = f"{module}.{function}"
        if message is None and self._interrupted:
            return self._cancelled(module, function)
        if message is None:
            status = self._terminate(grace_s=_EXIT_GRACE_S)
            return WorkerCrashedError(
                f"plugin '{plugin}': the worker (pid {self.pid}) died during "
                f"{name}: it {status}{tail_text(self._tail)}"
            )
        if message.request_id != request_id:
            self._terminate(grace_s=0.0)
            return ProtocolError(
                f"plugin '{plugin}': {name}: the worker replied to request "
                f"{message.request_id} while request {request_id} was waiting; "
                "the worker was killed"
            )
        if isinstance(message, Error):
            return PluginCallError(
                f"plugin '{plugin}': {name} raised {message.exc_type}: {message.message}",
                exc_type=message.exc_type,
            )
        if isinstance(message, Ready | Fatal | Result | ContextRequest):
            # A matching RESULT never gets here, nor a CONTEXT_REQUEST during a call.
            self._terminate(grace_s=0.0)
            return ProtocolError(
                f"plugin '{plugin}': {name}: the worker sent "
                f"{type(message).__name__.upper()} in reply to a call; the worker was killed"
            )
        assert_never(message)

    def interrupt(self, thread: int) -> bool:
        """Stop the call ``thread`` is making here, from another thread (its caller
        cancelled it): the host's end of the channel is shut down, which wakes the call
        at once, and the call kills the worker and raises CallCancelledError. A call
        cannot be taken back from a running process, so the worker goes; the next call
        starts a fresh one. False when ``thread`` has no call in this worker."""
        if self._owner != thread:
            return False
        with self._sock_lock:
            if self._death is not None:
                return False
            self._interrupted = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already shut or closed: the call is ending anyway
        return True

    def _cancelled(self, module: str, function: str) -> CallCancelledError:
        """The error of a call its caller interrupted (the worker is killed first)."""
        self._terminate(grace_s=0.0)
        return CallCancelledError(
            f"plugin '{self._spec.plugin}': {module}.{function} was cancelled by its caller "
            f"while it ran; the worker (pid {self.pid}) was stopped"
        )

    def close(self) -> None:
        """Ask the worker to exit, kill its process group after ~1 s, reap it.

        Idempotent; never raises for a worker that is already dead.
        """
        with self._lock:
            if self.after_first_call is not None:
                self._after_first_call()
            if self._closed:
                return
            self._closed = True
            if self._death is None:
                try:
                    shutdown = encode_shutdown(self._next_id)
                    send_frame(self._sock, shutdown, time.monotonic() + _EXIT_GRACE_S)
                except (OSError, TimeoutError):
                    pass  # already gone or not reading: the SIGKILL below settles it
                self._terminate(grace_s=_EXIT_GRACE_S)

    def _after_first_call(self) -> None:
        hook, self.after_first_call = self.after_first_call, None
        if hook is not None:
            hook()

    def __enter__(self) -> SubprocessWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------

    def handshake(self, init: bytes) -> None:
        """Send INIT and wait for READY; WorkerStartError (worker reaped) if not."""
        plugin = self._spec.plugin
        timeout_s = self._spec.start_timeout_s
        try:
            message = self._exchange(init, time.monotonic() + timeout_s)
        except UnsentFrameError:
            # The worker failed and exited before it could even read INIT
            # (its set-up failed): its log says why, like any early exit.
            message = None
        except TimeoutError:
            self._terminate(grace_s=0.0)
            raise WorkerStartError(
                f"plugin '{plugin}': the worker did not become ready within {timeout_s:g} s "
                f"and was killed{tail_text(self._tail)}; make the plugin's import and "
                "create_functions fast, or raise the start timeout"
            ) from None
        except ProtocolError as exc:
            self._terminate(grace_s=0.0)
            raise WorkerStartError(
                f"plugin '{plugin}': the worker sent a malformed frame while starting ({exc}) "
                "and was killed"
            ) from exc
        if message is None:
            status = self._terminate(grace_s=_EXIT_GRACE_S)
            raise WorkerStartError(
                f"plugin '{plugin}': the worker {status} before it was ready{tail_text(self._tail)}"
            )
        problem = self._check_ready(message)
        if isinstance(message, Fatal) and problem is None:
            self._terminate(grace_s=_EXIT_GRACE_S)
            raise WorkerStartError(
                f"plugin '{plugin}' could not be loaded from {self._spec.entry}: "
                f"{message.message}; fix the plugin and start it again"
            )
        if problem is not None or not isinstance(message, Ready):
            self._terminate(grace_s=0.0)
            raise WorkerStartError(
                f"plugin '{plugin}': the worker broke the protocol while starting ({problem}) "
                "and was killed"
            )
        self._started = StartedWorker(
            registered=types.MappingProxyType(dict(message.registered)),
            rejected=message.rejected,
        )

    def _check_ready(self, message: WorkerMessage) -> str | None:
        """Why the reply to INIT is not acceptable, or None."""
        if isinstance(message, ContextRequest):
            return "sent a ctx request before it was ready; ctx exists only during calls"
        if message.request_id != INIT_REQUEST_ID:
            return f"replied to request {message.request_id} instead of {INIT_REQUEST_ID}"
        if isinstance(message, Fatal):
            return None
        if not isinstance(message, Ready):
            return f"sent {type(message).__name__.upper()} instead of READY"
        # The worker is not trusted to have filtered: anything undeclared it
        # claims to have registered is a protocol violation.
        for module, functions in message.registered.items():
            declared = self._spec.modules.get(module)
            if declared is None:
                return f"claimed to register undeclared module {module!r}"
            extra = sorted(set(functions) - set(declared))
            if extra:
                return f"claimed to register undeclared functions {extra} of module {module!r}"
        return None

    def _exchange(self, frame: bytes, deadline: float) -> WorkerMessage | None:
        """Send one frame and read the reply; None when the worker is gone.

        TimeoutError past ``deadline``; ProtocolError for a malformed reply;
        UnsentFrameError when the worker was gone before the frame was sent.
        """
        try:
            send_frame(self._sock, frame, deadline)
            payload = self._reader.read_frame(deadline)
        except UnsentFrameError:
            raise
        except (BrokenPipeError, ConnectionResetError):
            return None
        if payload is None:
            return None
        return decode_worker_message(payload)

    def _terminate(self, *, grace_s: float) -> str:
        """Kill the worker and everything it started, reap it, release everything.

        Returns how the worker ended ("exited with code 3", "was killed by
        signal 9 (SIGKILL)").
        """
        if self._death is not None:
            return self._death
        if grace_s > 0:
            self._process.wait_exit(grace_s)
        status = describe_status(self._process.kill_and_reap())
        self._death = status + death_notes(self._process, self._spec)
        self._tail = read_tail(self._log)
        with self._sock_lock:
            self._sock.close()
        self._log.close()
        return self._death
