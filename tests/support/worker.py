"""A kctl worker in its own process, driven through the CLI as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.waiting import wait_until

TESTS = str(Path(__file__).resolve().parent.parent)


class Worker:
    def __init__(self, work: Path, port: int):
        self.work, self.port = work, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        # the test connectors and transforms (support.*) load by dotted path
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}

    def start(self, *connector_files: Path) -> None:
        self.launch(*connector_files)
        wait_until(lambda: self.kctl("connector", "list", check=False).returncode == 0
                   or self.proc.poll() is not None, timeout=60, message="worker REST up")
        assert self.proc.poll() is None, (self.work / "worker.log").read_text()[-3000:]

    def launch(self, *connector_files: Path) -> None:
        """Start the process and return at once (`start` also waits for its REST API)."""
        with open(self.work / "worker.log", "a") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kctl.cli.main", "worker", "start",
                 str(self.work / "worker.yaml"), *map(str, connector_files)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def kctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # wide, so table cells are not folded mid-word (rich falls back to 80 columns)
        r = subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", self.url, *args],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
        if check and r.returncode != 0:
            raise AssertionError(f"kctl {' '.join(args)} failed: {r.stdout}{r.stderr}")
        return r

    def status(self, name: str) -> dict:
        return json.loads(self.kctl("connector", "status", name, "-o", "json").stdout)
