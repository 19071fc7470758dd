import time
from collections.abc import Callable
from typing import TypeVar

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
