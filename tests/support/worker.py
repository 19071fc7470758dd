"""A kctl worker in its own process, driven through the CLI as a user would and watched
through its REST API (a look at a status costs a request, not a CLI process of its own:
stories poll statuses all the time).

The worker binds port 0 (write `LISTENER` into its worker.yaml) and reports the port it got
on its first lines ("REST API listening on URL"); `start` reads it from there, so no two
processes of a test session race for a port picked in advance. A restarted worker gets a
port of its own again.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from support.waiting import wait_until

TESTS = str(Path(__file__).resolve().parent.parent)
LISTENER = "http://127.0.0.1:0"
_LISTENING = re.compile(r"^REST API listening on (https?://\S+)$", re.MULTILINE)


class Worker:
    def __init__(self, work: Path, env: dict[str, str] | None = None):
        self.work = work
        self._url: str | None = None
        self.proc: subprocess.Popen | None = None
        self._log_from = 0
        # the test connectors and transforms (support.*) load by dotted path
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])),
                    **(env or {})}

    @property
    def url(self) -> str:
        assert self._url is not None, "the worker reports its URL once it has started"
        return self._url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def start(self, *connector_files: Path) -> None:
        """Start the process and wait until its REST API answers."""
        self.launch(*connector_files)
        self.wait_for_rest()

    def wait_for_rest(self, timeout: float = 90) -> None:
        """Wait for a launched worker to report its URL (it binds port 0) and answer."""
        self._url = wait_until(self._reported_url, timeout=timeout, interval=0.05,
                               message="the worker's REST API listening",
                               on_timeout=lambda: self.log()[-3000:])
        wait_until(self._answers, timeout=30, interval=0.05, message="worker REST up",
                   on_timeout=lambda: self.log()[-3000:])

    def launch(self, *connector_files: Path) -> None:
        """Start the process and return at once (`start` also waits for its REST API)."""
        self._url = None
        log = self.work / "worker.log"
        self._log_from = log.stat().st_size if log.exists() else 0
        with open(log, "a") as out:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kctl.cli.main", "worker", "start",
                 str(self.work / "worker.yaml"), *map(str, connector_files)],
                stdout=out, stderr=subprocess.STDOUT, env=self.env)

    def _reported_url(self) -> str | None:
        found = _LISTENING.search(self.log(self._log_from))
        if found:
            return found.group(1)
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited with {self.proc.returncode}:\n"
                                 + self.log()[-3000:])
        return None

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited with {self.proc.returncode}:\n"
                                 + self.log()[-3000:])
        try:
            return httpx.get(f"{self.url}/connectors", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self, start: int = 0) -> str:
        path = self.work / "worker.log"
        if not path.exists():
            return ""
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """Ctrl-C, as a user stops it; a worker that does not stop within 30 s fails the test."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("the worker did not stop within 30 s of SIGINT:\n"
                                     + self.log()[-3000:]) from None

    def kctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # wide, so table cells are not folded mid-word (rich falls back to 80 columns)
        r = subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", self.url, *args],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
        if check and r.returncode != 0:
            raise AssertionError(f"kctl {' '.join(args)} failed: {r.stdout}{r.stderr}")
        return r

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10)

    def rest(self, path: str) -> Any:
        """GET `path`'s JSON; any other answer, or none, fails naming it."""
        try:
            with self.http() as c:
                r = c.get(path)
        except httpx.HTTPError as e:
            raise AssertionError(f"GET {path}: {e!r}") from e
        if r.status_code != 200:
            raise AssertionError(f"GET {path}: {r.status_code} {r.text}")
        return r.json()

    def status(self, name: str) -> dict:
        """What `kctl connector status NAME -o json` prints: the REST answer."""
        return self.rest(f"/connectors/{name}/status")

    def offsets(self, name: str) -> list[dict]:
        """What `kctl connector offsets get NAME -o json` lists."""
        return self.rest(f"/connectors/{name}/offsets")["offsets"]
