"""examples/quickstart.py, the README's first command: it runs end to end and its counts are true.

The script starts a real worker (and Spark) in a subprocess, so the end-to-end story is slow;
the counting rule it relies on is checked on its own against a sink directory caught mid-write.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart.py"


def quickstart_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kctl_quickstart", QUICKSTART)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_committed_sink_files_are_counted(tmp_path):
    # what FileSink's output looks like while Spark is writing the next file
    events = tmp_path / "events" / "partition=0"
    (events / ".tmp-3f2a" / "_temporary" / "0").mkdir(parents=True)
    (events / ".tmp-3f2a" / "part-00000-c0ffee.json").write_text("in\nprogress\n")
    (events / ".tmp-3f2a" / "_temporary" / "0" / "part-00000.json").write_text("half\n")
    (events / "events+0+0+2.json").write_text("a\nb\nc\n")
    (events / ".events+0+0+2.json.crc").write_text("crc\n")
    (events / "events+0+3+3.json").write_text("d\n")
    clicks = tmp_path / "clicks" / "partition=1"
    clicks.mkdir(parents=True)
    (clicks / "clicks+1+0+1.json").write_text("x\ny\n")
    (clicks / "orders+1+0+1.json").write_text("misfiled\n")  # another topic's name
    (tmp_path / "_spark_metadata").mkdir()
    (tmp_path / "_spark_metadata" / "x+0+0+0.json").write_text("meta\n")

    qs = quickstart_module()
    assert sorted(p.name for p in qs.committed_output_files(tmp_path)) == [
        "clicks+1+0+1.json", "events+0+0+2.json", "events+0+3+3.json"]
    assert qs.count_output_lines(tmp_path) == 6
    assert qs.count_output_lines(tmp_path / "not-yet-created") == 0


@pytest.mark.slow
@pytest.mark.spark
def test_quickstart_moves_every_line_exactly_once(tmp_path):
    r = subprocess.run([sys.executable, str(QUICKSTART), "--lines", "3000",
                        "--dir", str(tmp_path / "work")],
                       capture_output=True, text=True, timeout=900, cwd=REPO,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    m = re.search(r"^(\d+) lines in \((.*)\), (\d+) lines out in ", r.stdout, re.MULTILINE)
    assert m, r.stdout[-4000:]
    lines_in, lines_out = int(m[1]), int(m[3])
    assert lines_in == lines_out == 3000
    for name in ("text-source", "csv-source", "json-source", "file-sink"):
        assert f"$ kctl connector status {name}" in r.stdout
    assert "FAILED" not in r.stdout
