"""An in-process standalone worker with a live REST API, and a CLI runner aimed at it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from kctl.cli.main import app
from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig


@dataclass
class Cli:
    url: str
    tmp: Path
    runner: CliRunner

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(app, ["--url", self.url, *args], input=input)

    def ok(self, *args: str, input: str | None = None) -> str:
        r = self(*args, input=input)
        assert r.exit_code == 0, f"kctl {' '.join(args)} -> {r.exit_code}\n{r.output}"
        return r.stdout

    def file(self, name: str, text: str) -> str:
        p = self.tmp / name
        p.write_text(text)
        return str(p)


@pytest.fixture
def worker(tmp_path) -> Iterator[StandaloneWorker]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100}))
    w.start()
    yield w
    w.stop()


@pytest.fixture
def kctl(worker, tmp_path) -> Cli:
    return Cli(worker.rest.url, tmp_path, CliRunner())


@pytest.fixture
def kctl_worker_url(worker) -> str:
    return worker.rest.url
