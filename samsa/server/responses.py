"""What a handler returns besides a finished response body: `NO_RESPONSE`, or a `Pending`.

A request is answered now (the handler returns the body), never (acks=0 produce:
`NO_RESPONSE`), or later: the handler returns a `Pending` that a delayed operation of the
purgatory (`purgatory.py`) completes when its condition holds or its deadline passes. The
network layer fills the request's slot on its connection when the Pending completes, and
cancels it when the connection closes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class _NoResponse:
    """Returned by a handler when the request gets no response at all (acks=0 produce)."""

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()


class Pending:
    """A response that is not ready yet and is completed by a call, not by a task.

    A task would resume only on a later turn of the event loop, after whatever woke it has
    finished (a produce: its response encoded and written). A long-poll fetch instead completes
    inside the append that satisfies it, as Kafka completes delayed fetches in the produce path,
    so the consumer's data goes out first. `on_done(fn)` gets `fn(value, error)` exactly once;
    `then(f)` is a Pending of `f(value)`; `cancel()` runs the cleanup given with `on_cancel`
    (the connection closed: the delayed operation leaves the purgatory).
    """

    __slots__ = ("_canceller", "_done", "_error", "_listener", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._listener: Callable[[Any, BaseException | None], None] | None = None
        self._canceller: Callable[[], None] | None = None

    @classmethod
    def completed(cls, value: Any) -> Pending:
        p = cls()
        p.complete(value)
        return p

    @property
    def done(self) -> bool:
        return self._done

    def complete(self, value: Any) -> None:
        self._finish(value, None)

    def fail(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        if self._done:
            return
        self._done, self._value, self._error = True, value, error
        self._canceller = None
        listener, self._listener = self._listener, None
        if listener is not None:
            listener(value, error)

    def on_done(self, fn: Callable[[Any, BaseException | None], None]) -> None:
        if self._done:
            fn(self._value, self._error)
        else:
            self._listener = fn

    def on_cancel(self, fn: Callable[[], None]) -> None:
        self._canceller = fn

    def cancel(self) -> None:
        canceller, self._canceller = self._canceller, None
        self._listener = None
        if canceller is not None and not self._done:
            canceller()

    def then(self, f: Callable[[Any], Any]) -> Pending:
        out = Pending()

        def forward(value: Any, error: BaseException | None) -> None:
            if error is not None:
                out.fail(error)
                return
            try:
                mapped = f(value)
            except Exception as e:
                out.fail(e)
                return
            out.complete(mapped)

        self.on_done(forward)
        out.on_cancel(self.cancel)
        return out

    @classmethod
    def gather(cls, parts: Sequence[Pending]) -> Pending:
        """A Pending of the list of `parts`' values, in order, once all are done (the first
        failure fails it; cancelling it cancels every part)."""
        out = cls()
        values: list[Any] = [None] * len(parts)
        left = [len(parts)]

        def part_done(i: int) -> Callable[[Any, BaseException | None], None]:
            def done(value: Any, error: BaseException | None) -> None:
                if error is not None:
                    out.fail(error)
                    return
                values[i] = value
                left[0] -= 1
                if left[0] == 0:
                    out.complete(values)
            return done

        def cancel() -> None:
            for p in parts:
                p.cancel()

        if not parts:
            out.complete(values)
            return out
        out.on_cancel(cancel)
        for i, p in enumerate(parts):
            p.on_done(part_done(i))
        return out
