"""Every Kafka client a worker opens, over TLS, against the real broker (behind TLS, see
support/tls_broker.py): librdkafka's producers, consumers and admin, and kafka-python's
group drivers (the sink consumer groups), through a worker as a user configures it with
Kafka's setting names. A client that does not speak TLS, or does not trust the broker's
certificate, gets a clear error and reaches nothing."""

from __future__ import annotations

import pytest
from support import connectors as sc
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.errors import KctlError, TransportError
from kctl.transport.kafka import KafkaTransport
from kctl.transport.kafka_consumer_group import ConsumerGroupMember


def tls(files, **extra):
    return {"security.protocol": "SSL", "ssl.truststore.location": str(files.ca), **extra}


def test_a_worker_runs_a_source_and_a_sink_group_over_tls(tmp_path, tls_broker, tls_files):
    topic, sink = unique("tls-topic"), unique("tls-sink")
    settings = {"bootstrap.servers": tls_broker.bootstrap,
                "topic.creation.default.replication.factor": 1, **tls(tls_files)}
    with running_worker(tmp_path / "state", settings) as w:
        w.herder.put_connector_config(unique("tls-source"), {
            "connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "count": "50", "tasks.max": "1"})
        w.herder.put_connector_config(sink, {
            "connector.class": "support.connectors.CollectingSinkConnector", "topics": topic,
            "tasks.max": "1", "value.converter": "StringConverter"})
        # the sink's records came through its consumer group (kafka-python over TLS) and
        # librdkafka's fetches (over TLS); the source's through a TLS producer
        wait_until(lambda: len(sc.SINK_RECEIVED[sink]) >= 50, timeout=60,
                   message="the sink read every record over TLS")
    offsets = sorted(o for _, _, o, _ in sc.SINK_RECEIVED[sink])
    assert offsets[:50] == list(range(50))


@pytest.mark.parametrize("names", ["librdkafka", "pkcs12"])
def test_librdkafka_names_and_a_pkcs12_truststore_work_too(tls_broker, tls_files, names):
    security = {"security.protocol": "SSL", "ssl.ca.location": str(tls_files.ca)} \
        if names == "librdkafka" else {
            "security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(tls_files.server_p12),
            "ssl.truststore.password": "store-pass"}
    transport = KafkaTransport(tls_broker.bootstrap, security=security)
    try:
        topic = unique(f"tls-{names}")
        produce(transport, topic, [b"x"])
        assert topic in transport.admin().list_topics()
    finally:
        transport.close()


@pytest.mark.parametrize("security, why", [
    ({}, "a plaintext client"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "OTHER_CA"},
     "a client that trusts another CA"),
])
def test_a_client_the_broker_cannot_talk_to_fails_clearly(tls_broker, tls_files, security,
                                                          why):
    security = {k: (str(tls_files.other_ca) if v == "OTHER_CA" else v)
                for k, v in security.items()}
    transport = KafkaTransport(tls_broker.bootstrap, security=security)
    try:
        with pytest.raises(TransportError, match="cannot reach the Kafka cluster at "
                           + tls_broker.bootstrap):
            transport.admin().list_topics()
    finally:
        transport.close()
    # the sink consumer group's driver (kafka-python) is refused as clearly
    group = ConsumerGroupMember(tls_broker.bootstrap, unique("refused"), ["t"], {},
                                dict, security=security)
    group.driver.request_timeout_ms = 3000
    with pytest.raises(TransportError, match="cannot reach the Kafka cluster"):
        group.driver.start()


def test_a_worker_config_that_cannot_work_is_refused_naming_the_setting(tmp_path, tls_files):
    from kctl.runtime.worker_config import WorkerConfig

    base = {"bootstrap.servers": "127.0.0.1:9", "state.dir": str(tmp_path)}
    cases = {
        "ssl.truststore.type": {"security.protocol": "SSL",
                                "ssl.truststore.location": "/x/truststore.jks"},
        "ssl.truststore.location": {"security.protocol": "SSL",
                                    "ssl.truststore.location": str(tmp_path / "missing.pem")},
        "sasl.jaas.config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                             "sasl.jaas.config": "com.sun.security.auth.module."
                                                 "Krb5LoginModule required;"},
        "sasl.mechanism": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
        "producer.ssl.truststore.type": {"producer.security.protocol": "SSL",
                                         "producer.ssl.truststore.location": "/x/t.jks"},
    }
    for key, settings in cases.items():
        with pytest.raises(KctlError) as e:
            WorkerConfig({**base, **settings})
        assert key in e.value.errors, (key, e.value.errors)


def test_group_describe_asks_a_tls_broker_with_the_workers_settings(tls_broker, tls_files):
    """`kctl group describe` asks the broker (DescribeGroups) with the worker's own
    security settings: over TLS the broker answers, and names the worker as a member."""
    from kctl.launch import DistributedWorker
    from kctl.rest.rebalances import describe_worker_group
    from kctl.runtime.worker_config import WorkerConfig

    group = unique("tls-workers")
    worker = DistributedWorker(WorkerConfig({
        "bootstrap.servers": tls_broker.bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status", "config.storage.replication.factor": 1,
        "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
        "listeners": "http://127.0.0.1:0", "scheduled.rebalance.max.delay.ms": 0,
        **tls(tls_files)}))
    worker.start()
    try:
        wait_until(lambda: worker.herder.healthy()[0], timeout=60,
                   message="the worker joined its group over TLS")
        described = describe_worker_group(worker.herder, group)
    finally:
        worker.stop()
    assert "broker_error" not in described, described["broker_error"]
    [member] = described["members"]
    assert described["broker_members"] == [member["member_id"]]


def test_a_worker_that_cannot_reach_its_cluster_is_not_healthy_and_says_why(tmp_path, tls_broker,
                                                                           tls_files):
    """A worker whose truststore holds another CA runs (its stores are files) but reaches
    nothing: `/health` answers 503 naming the cluster and the refused handshake, not
    "healthy" while its tasks fail. With the right CA the same worker is healthy."""
    import httpx

    settings = {"bootstrap.servers": tls_broker.bootstrap,
                "security.protocol": "SSL", "ssl.truststore.location": str(tls_files.other_ca)}
    with running_worker(tmp_path / "wrong", settings) as w:
        health = w.herder.health()
        assert health.status == "unhealthy", health
        assert f"cannot reach the Kafka cluster at {tls_broker.bootstrap}" in health.message
        r = httpx.get(f"{w.rest.url}/health", timeout=10)
        assert r.status_code == 503
        assert r.json()["status"] == "unhealthy"
        assert "cannot reach its Kafka cluster" in r.json()["message"]
    with running_worker(tmp_path / "right", {**settings, **tls(tls_files)}) as w:
        r = httpx.get(f"{w.rest.url}/health", timeout=10)
        assert (r.status_code, r.json()["status"]) == (200, "healthy"), r.json()
