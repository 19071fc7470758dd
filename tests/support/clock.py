"""The one fake clock of the tests: time moves only when the test moves it.

Code under test takes a clock (kctl injects one everywhere it reads the time): pass the
clock itself where it wants a `() -> float` of seconds, `.time` or `.monotonic` where it
wants those, and `.sleep` where it would wait, so a sleep moves the time at once.
"""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds
