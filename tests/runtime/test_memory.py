"""An idle worker gives back the memory its last batches used, once per idle period."""

from __future__ import annotations

from kctl.runtime.memory import IdleRelease


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_memory_is_released_once_after_records_moved_and_then_none_for_a_while():
    clock, releases = Clock(), []
    idle = IdleRelease(clock, after=5.0, release=lambda: releases.append(clock.now))
    for _ in range(10):  # idle from the start: nothing was used, nothing to give back
        clock.now += 1
        idle.tick(0)
    assert releases == []
    idle.tick(100_000)
    for _ in range(4):
        clock.now += 1
        idle.tick(0)
    assert releases == [], "a pause shorter than the idle time keeps the memory"
    clock.now += 1
    idle.tick(0)
    assert releases == [15.0]
    for _ in range(20):
        clock.now += 1
        idle.tick(0)
    assert releases == [15.0], "once per idle period"
    idle.tick(5)
    clock.now += 5
    idle.tick(0)
    assert releases == [15.0, 40.0]
