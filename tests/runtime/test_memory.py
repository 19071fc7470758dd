"""An idle worker gives back the memory its last batches used, once per idle period."""

from __future__ import annotations

import os
import subprocess
import sys

from support.clock import FakeClock

from kctl.runtime.memory import IdleRelease


def test_memory_is_released_once_after_records_moved_and_then_none_for_a_while():
    clock, releases = FakeClock(), []
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


def _pool_after_configuring(env: dict[str, str]) -> str:
    code = ("from kctl.runtime.memory import configure_process_allocators\n"
            "configure_process_allocators()\n"
            "import pyarrow as pa; print(pa.default_memory_pool().backend_name)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    return done.stdout.strip()


def test_a_worker_process_allocates_arrow_buffers_with_jemalloc_unless_told_otherwise():
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _pool_after_configuring(env) == "jemalloc"  # pyarrow's own default: mimalloc
    assert _pool_after_configuring({**env, "ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"
