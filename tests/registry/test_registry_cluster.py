"""The registry of a cluster: any worker answers, the leader assigns ids. A client that
registers through a follower gets the id the leader assigned (the request is forwarded, as
connector writes are), every worker then serves it, and ids survive a full restart."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from support.cluster import Cluster
from support.waiting import wait_until

pytestmark = pytest.mark.slow


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"r{n}", "fields": [
        {"name": "id", "type": "long"}]})


def leader(cluster: Cluster):
    def find():
        for w in cluster.live():
            described = json.loads(w.kctl("group", "describe", "-o", "json").stdout)
            lead = described.get("leader")
            if lead:
                return next((x for x in cluster.live() if x.worker_id in str(lead)), None)
        return None

    return wait_until(find, timeout=60, interval=0.5, message="the group's leader")


def test_a_follower_takes_registrations_the_leader_numbers_and_ids_survive_a_restart(
        tmp_path, kafka_broker):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap)
    try:
        first, second = cluster.add(), cluster.add()
        lead = leader(cluster)
        follower = second if lead is first else first
        via_follower = SchemaRegistryClient({"url": f"{follower.url}/schema-registry"})
        via_leader = SchemaRegistryClient({"url": f"{lead.url}/schema-registry"})
        ids = [via_follower.register_schema(f"s{n}-value", Schema(schema(n), "AVRO"))
               for n in range(3)]
        assert ids == sorted(set(ids)), "one id per schema, in order"
        assert via_leader.register_schema("s0-value", Schema(schema(0), "AVRO")) == ids[0]
        for client in (via_leader, via_follower):
            assert json.loads(client.get_schema(ids[2]).schema_str)["name"] == "r2"
            assert client.get_versions("s1-value") == [1]
        log = lead.log()
        assert "Traceback" not in log, log[-3000:]

        for w in cluster.workers:
            w.stop()
        # Every worker process stopped, then a cluster started again on the same schemas
        # topic. (It forms a new group: the test broker keeps a group whose leader left during
        # a rebalance waiting for that leader's member id, see CONTRIBUTING.md, and a worker
        # in a fresh state.dir does not hold it.)
        restarted = Cluster(tmp_path / "again", kafka_broker.bootstrap,
                            **{"schema.registry.topic": cluster.settings["schema.registry.topic"]})
        restarted.add()
        cluster = restarted
        again = SchemaRegistryClient({"url": f"{restarted.workers[0].url}/schema-registry"})
        assert json.loads(again.get_schema(ids[1]).schema_str)["name"] == "r1"
        new = again.register_schema("s9-value", Schema(schema(9), "AVRO"))
        assert new > max(ids), "a restarted cluster never reuses an id"
    finally:
        for w in cluster.live():
            w.stop()
