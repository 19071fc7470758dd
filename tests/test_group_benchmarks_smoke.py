"""The group benchmarks run end to end at a tiny size and print their rows.

Only the rows and the notes people read them by are checked, never a figure: timings on
shared machines mean nothing, and the benchmarks are read by people, not asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(script: str, *args: str, results: Path | None = None) -> str:
    """Runs `script`; its result file goes to `results` (a test's own directory), never into
    the repository's benchmarks/results."""
    extra = ["--results", str(results)] if results is not None else []
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args, *extra],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, f"{script} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def result_file(results: Path, benchmark: str) -> dict:
    """The result file a run wrote: every figure named, with its unit, and the machine."""
    doc = json.loads((results / f"{benchmark}.json").read_text())
    assert doc["benchmark"] == benchmark and doc["command"].startswith(f"python benchmarks/{benchmark}.py")
    assert doc["machine"]["cpus"] >= 1 and doc["machine"]["python"]
    assert doc["figures"] and all(f["name"] and f["unit"] for f in doc["figures"])
    return doc


def rows(out: str, label: str) -> list[str]:
    """The lines that start with `label` (after indentation)."""
    found = [line for line in out.splitlines() if line.strip().startswith(label)]
    assert found, f"no line with {label!r} in:\n{out}"
    return found


def test_consumer_assignor_benchmark_prints_every_round_against_the_target(tmp_path):
    out = run_benchmark("bench_consumer_assignor.py", "--topics", "6", "--partitions", "5",
                        "--consumers", "4", "--repeat", "1", results=tmp_path)
    assert "cooperative-sticky: 30 partitions, 4 consumers" in out
    for label in ("equal: fresh group", "equal: after consumer-00002 leaves",
                  "unequal: fresh group", "unequal: next round, owned reported",
                  "varied: fresh group"):
        (line,) = rows(out, label)
        assert line.rstrip().endswith("of the 2 s target") and " s " in line
    assert "none revoked from survivors" in out
    doc = result_file(tmp_path, "bench_consumer_assignor")
    assert len(doc["figures"]) == 5 and {f["target"] for f in doc["figures"]} == {"< 2 s"}


def test_connect_assignor_benchmark_prints_every_scenario_against_the_target(tmp_path):
    out = run_benchmark("bench_connect_assignor.py", "--workers", "3", "--connectors", "4",
                        "--tasks-per-connector", "2", "--repeat", "1", results=tmp_path)
    assert "incremental cooperative assignor: 8 tasks, 4 connectors, 3 workers" in out
    for label in ("fresh start", "one worker joins", "one worker leaves", "nothing changed",
                  "one connector added"):
        (line,) = rows(out, label)
        assert " ms " in line and "x target" in line and "(moved " in line
    doc = result_file(tmp_path, "bench_connect_assignor")
    assert [f["name"].split(":")[0] for f in doc["figures"]] == [
        "fresh start", "one worker joins", "one worker leaves", "nothing changed",
        "one connector added"]


def test_rebalance_storm_prints_both_phases_and_says_where_the_contrast_is(tmp_path):
    out = run_benchmark("bench_rebalance_storm.py", "--connectors", "3", "--tasks", "2",
                        "--workers", "2", results=tmp_path)
    table = [line.split() for line in out.splitlines()
             if line.startswith(("eager ", "sessioned "))]
    assert [(r[0], r[1]) for r in table] == [
        ("eager", "start"), ("eager", "stop"), ("sessioned", "start"), ("sessioned", "stop")]
    stable = {(r[0], r[1]): r[5] for r in table}
    for phase in ("start", "stop"):
        assert stable[("eager", phase)] == stable[("sessioned", phase)]
    assert "stable at ms: the same under both protocols" in out
    assert "simulated rounds take no time" in out
    rows(out, "restart busy: ")
    rows(out, "modelled phase: ")
    figures = {f["name"]: f["value"] for f in result_file(tmp_path, "bench_rebalance_storm")["figures"]}
    assert figures["sessioned, start phase: task stops"] == int(
        next(r for r in table if r[:2] == ["sessioned", "start"])[3])


@pytest.mark.broker
def test_broker_group_benchmark_prints_the_join_against_the_raw_round_trip(kafka_broker):
    out = run_benchmark("bench_group_broker.py", "--bootstrap", kafka_broker.bootstrap,
                        "--runs", "1")
    assert re.search(r"round trip \(kafka-python\)\s+\d+\.\d\d s$",
                     rows(out, "raw: one JoinGroup + SyncGroup round trip")[0])
    assert "x the raw round trip" in rows(out, "kctl: w4 joins 3 workers")[0]
    assert rows(out, "only moved work was stopped")
