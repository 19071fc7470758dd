"""`kctl worker start` has Spark ready, and warmed, before the first connector asks for it."""

from __future__ import annotations

import json
import re

import pytest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_a_started_worker_builds_and_warms_spark_before_any_connector(tmp_path):
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(json.dumps({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER, "spark.master": "local[1]",
        "spark.driver.memory": "512m", "spark.ui.enabled": "false",
        "spark.start": "eager"}))  # the suite defaults workers to lazy (tests/conftest.py)
    w.start()
    try:
        log = tmp_path / "worker.log"
        wait_until(lambda: "Spark warm-up:" in log.read_text(), timeout=600, interval=1,
                   message="Spark started and warmed up with no connector",
                   on_timeout=lambda: log.read_text()[-3000:])
        text = log.read_text()
        assert "SparkSession ready" in text
        jobs = int(re.search(r"Spark warm-up: (\d+) jobs", text).group(1))
        assert jobs > 0, "the warm-up ran jobs while no task needed Spark"
        assert json.loads(w.kctl("connector", "list", "-o", "json").stdout) == {}
    finally:
        w.stop()
