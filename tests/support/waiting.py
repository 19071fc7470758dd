import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
               message: str = "condition", on_timeout: Callable[[], str] | None = None) -> T:
    """Poll until cond() is truthy; fail with `message` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    extra = f"\n{on_timeout()}" if on_timeout is not None else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last: {last!r})"
                         + extra)


def through_rebalances(call: Callable[[], T], timeout: float = 60.0) -> T:
    """`call()` (an HTTP request), again while a worker answers 409 because its group is
    rebalancing, as a Connect client retries; the first other answer is returned."""
    deadline = time.monotonic() + timeout
    while True:
        answer: Any = call()
        if (getattr(answer, "status_code", None) != 409 or "rebalanc" not in answer.text
                or time.monotonic() > deadline):
            return answer
        time.sleep(0.2)
