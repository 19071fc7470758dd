"""The three-worker example in examples/cluster parses as one cluster of three workers."""

from __future__ import annotations

from pathlib import Path

import yaml

from kctl.runtime.worker_config import WorkerConfig

EXAMPLES = Path(__file__).parents[2] / "examples" / "cluster"


def test_the_example_workers_form_one_cluster(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    configs = [WorkerConfig.from_file(EXAMPLES / f"worker{i}.yaml") for i in (1, 2, 3)]
    assert all(c.distributed for c in configs)
    assert {c.get_list("bootstrap.servers")[0] for c in configs} == {"127.0.0.1:9092"}
    shared = ("group.id", "config.storage.topic", "offset.storage.topic",
              "status.storage.topic")
    assert len({tuple(c.get(k) for k in shared) for c in configs}) == 1
    assert len({c.listener() for c in configs}) == 3
    assert len({c.state_dir for c in configs}) == 3


def test_the_example_connectors_are_a_file_pipeline():
    src = yaml.safe_load((EXAMPLES / "lines.yaml").read_text())["config"]
    sink = yaml.safe_load((EXAMPLES / "lines-out.yaml").read_text())["config"]
    assert src["topic"] == sink["topics"]
    assert sink["delivery.guarantee"] == "exactly_once"
