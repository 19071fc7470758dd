"""Three transforms and a predicate in a running pipeline, on the embedded log and on Kafka.

Two counters write to `<p>-a` and `<p>-b`. The sink's chain wraps each value in a struct
(HoistField), stamps the topic it came from into it (InsertField), and renames the topic of
every record *not* from b (RegexRouter with a negated TopicNameMatches predicate). The chain
is the same code the source side runs; here it is configured with Kafka Connect's syntax
and checked on what the sink task receives.
"""

from __future__ import annotations

import pytest
from support import connectors as sc
from support.waiting import wait_until

from kctl.api.data import Struct
from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"


@pytest.fixture
def worker(transport_settings, tmp_path):
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100, **transport_settings}))
    w.start()
    yield w
    w.stop()


def test_hoist_insert_and_route_unless_the_topic_is_b(worker, request):
    p = f"chain-{request.node.callspec.id}"
    h = worker.herder
    for t in ("a", "b"):
        h.create_connector(f"{p}-{t}", {"connector.class": SOURCE, "topic": f"{p}-{t}",
                                        "count": 10})
    sink = f"{p}-sink"
    h.create_connector(sink, {
        "connector.class": SINK, "topics": f"{p}-a,{p}-b",
        "transforms": "hoist,insert,route",
        "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "n",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.topic.field": "from",
        "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-routed",
        "transforms.route.predicate": "isB", "transforms.route.negate": "true",
        "predicates": "isB", "predicates.isB.type": "TopicNameMatches",
        "predicates.isB.pattern": ".*-b"})

    wait_until(lambda: len(sc.SINK_RECEIVED[sink]) >= 20, timeout=60,
               message="20 records through the chain")
    got = sorted((topic, v.get("from"), v.get("n")) for topic, _, _, v in sc.SINK_RECEIVED[sink])
    assert all(isinstance(v, Struct) for *_, v in sc.SINK_RECEIVED[sink])
    assert got == sorted([(f"{p}-a-routed", f"{p}-a", i) for i in range(10)] +
                         [(f"{p}-b", f"{p}-b", i) for i in range(10)])
    schema = sc.SINK_RECEIVED[sink][0][3].schema
    assert [f.name for f in schema.fields] == ["n", "from"]
