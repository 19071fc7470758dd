"""Result files: each benchmark run writes what it measured, with its baselines, ratios, the
machine and the commit, to `benchmarks/results/<benchmark>.json`; `python -m kctl.docs`
renders the latest of each into docs/performance.md.

A figure is only meaningful next to the baseline measured in the same run, so a figure
carries its baseline and ratio rather than leaving the reader to find them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Baseline:
    name: str
    value: float


@dataclass(frozen=True)
class Figure:
    """One measured figure; `ratio` is value / baseline (or as the benchmark defines it)."""

    name: str
    value: float
    unit: str
    baseline: Baseline | None = None
    ratio: float | None = None
    target: str = ""


@dataclass(frozen=True)
class Result:
    benchmark: str
    title: str
    command: str
    figures: list[Figure]
    notes: str = ""
    machine: dict[str, object] = field(default_factory=dict)
    commit: str = ""
    recorded_at: str = ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                        help="directory the result file is written to "
                             "(default: benchmarks/results; --quick runs write none)")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    commit = out.stdout.strip()
    return f"{commit}+changes" if commit and dirty.stdout.strip() else commit


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, object]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpus": os.cpu_count() or 0, "cpu": _cpu_model(),
            "python": platform.python_version(), "system": f"{platform.system()} {platform.machine()}",
            "load_average_1m": round(load[0], 2)}


def record(args: argparse.Namespace, benchmark: str, title: str, figures: list[Figure],
           notes: str = "") -> Path | None:
    """Write the run's result file (none for a --quick run); returns its path."""
    if getattr(args, "quick", False):
        return None
    command = "python " + " ".join(["benchmarks/" + Path(sys.argv[0]).name, *sys.argv[1:]])
    result = Result(benchmark=benchmark, title=title, command=command, figures=figures,
                    notes=notes, machine=machine(), commit=_commit(),
                    recorded_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    directory: Path = args.results
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{benchmark}.json"
    path.write_text(json.dumps(asdict(result), indent=2, sort_keys=False) + "\n")
    print(f"result written to {path}")
    return path
