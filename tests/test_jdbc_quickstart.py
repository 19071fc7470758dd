"""examples/jdbc_quickstart.py: one command copies an SQLite table through a topic into
another table and follows its inserts and updates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "jdbc_quickstart.py"


def test_the_sqlite_table_to_table_example_runs_and_its_tables_agree():
    r = subprocess.run([sys.executable, str(SCRIPT), "--rows", "2000"], capture_output=True,
                       text=True, timeout=600, cwd=SCRIPT.parents[1])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "snapshot: 2000 rows copied" in r.stdout
    assert "followed: 1000 inserts and 20 updates" in r.stdout
    assert "hold the same 3000 rows" in r.stdout
    assert r.stdout.count("RUNNING") == 4
