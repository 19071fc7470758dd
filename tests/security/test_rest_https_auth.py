"""A standalone worker behind https and HTTP Basic auth, driven by kctl and by clients that
know nothing of kctl (httpx and curl, as a Kafka Connect client or script would). Every
request without the right credentials or without a trusted connection is refused with a
clear answer, and nothing changes on the worker."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kctl.errors import KctlError
from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

SOURCE = {"connector.class": "support.connectors.CounterSourceConnector", "topic": "t",
          "count": "5", "tasks.max": "1"}
USERS = "alice=wonderland\nbob: builder\n"


@contextlib.contextmanager
def secure_worker(tmp_path: Path, tls_files, **extra) -> Iterator[StandaloneWorker]:
    creds = tmp_path / "credentials.properties"
    creds.write_text(USERS)
    w = StandaloneWorker(WorkerConfig({
        "state.dir": str(tmp_path / "state"), "listeners": "https://127.0.0.1:0",
        "listeners.https.ssl.keystore.location": str(tls_files.server),
        "rest.extension.classes": "org.apache.kafka.connect.rest.basic.auth.extension."
                                  "BasicAuthSecurityRestExtension",
        "rest.basic.auth.credentials.file": str(creds), **extra}))
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def worker(tmp_path, tls_files) -> Iterator[StandaloneWorker]:
    with secure_worker(tmp_path, tls_files) as w:
        yield w


def kctl(url: str | None, *args: str, env: dict | None = None, stdin: str | None = None
         ) -> subprocess.CompletedProcess:
    """kctl as a user runs it, with only the KCTL_* variables given in `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    where = ["--url", url] if url else []
    return subprocess.run([sys.executable, "-m", "kctl.cli.main", *where, *args],
                          capture_output=True, text=True, input=stdin,
                          env={**clean, "COLUMNS": "200", **(env or {})}, timeout=60)


def names(worker) -> list[str]:
    return worker.herder.connectors()


def test_the_worker_answers_https_and_asks_every_request_for_credentials(worker, tls_files):
    url = worker.rest.url
    assert url.startswith("https://")
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=tls_files.ca),
                      timeout=30) as anonymous:
        for method, path in [("GET", "/"), ("GET", "/connectors"), ("GET", "/health"),
                             ("GET", "/metrics"), ("GET", "/openapi.json"),
                             ("GET", "/connector-plugins"), ("GET", "/admin/loggers"),
                             ("POST", "/connectors")]:
            r = anonymous.request(method, path, json={"name": "sneaky", "config": SOURCE})
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.headers["www-authenticate"].startswith("Basic realm=")
            assert r.json()["error_code"] == 401
        wrong = anonymous.post("/connectors", auth=("alice", "looking-glass"),
                               json={"name": "sneaky", "config": SOURCE})
        assert wrong.status_code == 401
        unknown = anonymous.get("/connectors", auth=("mallory", "wonderland"))
        assert unknown.status_code == 401
        # an internal path without a signature is not a way in either
        internal = anonymous.post("/connectors/sneaky/tasks", json=[SOURCE])
        assert internal.status_code == 401
        # nor a made-up signature: only a cluster that signs lets signed requests through
        forged = anonymous.post("/connectors/sneaky/tasks", json=[SOURCE], headers={
            "X-Connect-Authorization": "Zm9yZ2Vk",
            "X-Connect-Request-Signature-Algorithm": "HmacSHA256"})
        assert forged.status_code == 401
        assert names(worker) == []  # nothing changed
        created = anonymous.post("/connectors", auth=("bob", "builder"),
                                 json={"name": "ok", "config": SOURCE})
        assert created.status_code == 201, created.text
        assert created.headers["location"].startswith("https://")
        assert anonymous.get("/connectors", auth=("alice", "wonderland")).json() == ["ok"]


def test_clients_that_cannot_trust_the_worker_are_refused(worker, tls_files):
    url = worker.rest.url
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(url + "/connectors", auth=("alice", "wonderland"))  # system CAs only
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(url + "/connectors", auth=("alice", "wonderland"),
                  verify=ssl.create_default_context(cafile=tls_files.other_ca))
    plain = url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.post(plain + "/connectors", auth=("alice", "wonderland"),
                   json={"name": "plain", "config": SOURCE})
    assert names(worker) == []


def test_a_client_refuses_a_worker_with_an_expired_certificate(tmp_path, tls_files):
    with secure_worker(tmp_path, tls_files,
                       **{"listeners.https.ssl.keystore.location": str(tls_files.expired)}) as w:
        with pytest.raises(httpx.ConnectError, match="expired"):
            httpx.get(w.rest.url + "/", auth=("alice", "wonderland"),
                      verify=ssl.create_default_context(cafile=tls_files.ca))
        r = kctl(w.rest.url, "--cacert", str(tls_files.ca), "connector", "list",
                 env={"KCTL_USER": "alice", "KCTL_PASSWORD": "wonderland"})
        assert r.returncode != 0
        assert "cannot verify the certificate" in r.stderr and "expired" in r.stderr


def test_curl_drives_the_worker_as_a_connect_script_would(worker, tls_files):
    url = worker.rest.url
    base = ["curl", "-sS", "--cacert", str(tls_files.ca), "-o", "/dev/null",
            "-w", "%{http_code}"]
    create = ["-X", "POST", "-H", "Content-Type: application/json", "--data",
              '{"name": "from-curl", "config": {"connector.class": '
              '"support.connectors.CounterSourceConnector", "topic": "t", "tasks.max": "1"}}',
              url + "/connectors"]
    no_creds = subprocess.run(base + create, capture_output=True, text=True)
    assert no_creds.stdout == "401"
    assert names(worker) == []
    ok = subprocess.run([*base, "-u", "alice:wonderland", *create], capture_output=True,
                        text=True)
    assert ok.stdout == "201", ok.stderr
    untrusted = subprocess.run(["curl", "-sS", "-u", "alice:wonderland", url + "/connectors"],
                               capture_output=True, text=True)
    assert untrusted.returncode == 60 and "certificate" in untrusted.stderr.lower()
    assert names(worker) == ["from-curl"]


def test_kctl_verifies_the_worker_and_takes_credentials_from_the_environment(worker,
                                                                             tls_files):
    url = worker.rest.url
    creds = {"KCTL_USER": "alice", "KCTL_PASSWORD": "wonderland"}
    untrusted = kctl(url, "connector", "list", env=creds)
    assert untrusted.returncode == 5 and "cannot verify the certificate" in untrusted.stderr
    assert "--cacert" in untrusted.stderr
    anonymous = kctl(url, "--cacert", str(tls_files.ca), "connector", "list")
    assert anonymous.returncode == 1 and "unauthorized" in anonymous.stderr
    assert "KCTL_USER" in anonymous.stderr
    wrong = kctl(url, "--cacert", str(tls_files.ca), "connector", "list",
                 env={"KCTL_USER": "alice", "KCTL_PASSWORD": "nope"})
    assert wrong.returncode == 1 and "unauthorized" in wrong.stderr
    ok = kctl(url, "--cacert", str(tls_files.ca), "connector", "list", "-o", "json", env=creds)
    assert ok.returncode == 0, ok.stderr
    insecure = kctl(url, "--insecure", "connector", "list", "-o", "json", env=creds)
    assert insecure.returncode == 0 and "not verified" in insecure.stderr
    assert "wonderland" not in " ".join(p.stderr + p.stdout for p in
                                        (untrusted, anonymous, wrong, ok, insecure))


def test_kctl_keeps_ca_and_credentials_in_a_private_context(worker, tls_files, tmp_path):
    url = worker.rest.url
    env = {"KCTL_CONFIG": str(tmp_path / "kctl.yaml")}
    added = kctl(None, "context", "set", "secure", "--url", url, "--cacert", str(tls_files.ca),
                 "--user", "bob", "--password-stdin", env=env, stdin="builder\n")
    assert added.returncode == 0, added.stderr
    assert oct((tmp_path / "kctl.yaml").stat().st_mode & 0o777) == "0o600"
    assert "builder" not in added.stdout
    listed = kctl(None, "connector", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    # the group commands use the same client: CA and credentials of the context
    history = kctl(None, "rebalance", "history", "-o", "json", env=env)
    assert "unauthorized" not in history.stderr and "certificate" not in history.stderr, \
        history.stderr
    # the context's password never goes to a URL given on the command line
    elsewhere = kctl(url, "--cacert", str(tls_files.ca), "connector", "list", env=env)
    assert elsewhere.returncode == 1 and "unauthorized" in elsewhere.stderr
    no_password = kctl(None, "context", "set", "x", "--url", url, "--user", "bob", env=env,
                       stdin="")
    assert no_password.returncode == 2 and "needs a password" in no_password.stderr


def test_client_certificates_when_the_listener_requires_them(tmp_path, tls_files):
    import ssl as _ssl

    with secure_worker(tmp_path, tls_files, **{
            "listeners.https.ssl.client.auth": "required",
            "listeners.https.ssl.truststore.location": str(tls_files.ca)}) as w:
        ctx = _ssl.create_default_context(cafile=tls_files.ca)
        with pytest.raises(httpx.HTTPError):
            httpx.get(w.rest.url + "/connectors", auth=("alice", "wonderland"), verify=ctx)
        ctx.load_cert_chain(tls_files.client)
        r = httpx.get(w.rest.url + "/connectors", auth=("alice", "wonderland"), verify=ctx)
        assert r.status_code == 200


def test_a_jaas_file_in_kafkas_format_names_the_credentials(tmp_path, tls_files):
    creds = tmp_path / "users.properties"
    creds.write_text("carol=secret-c\n")
    jaas = tmp_path / "connect_jaas.conf"
    jaas.write_text('KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.'
                    f'PropertyFileLoginModule required\n  file="{creds}";\n}};\n')
    with secure_worker(tmp_path, tls_files,
                       **{"rest.basic.auth.credentials.file": str(jaas)}) as w:
        ctx = ssl.create_default_context(cafile=tls_files.ca)
        assert httpx.get(w.rest.url + "/", auth=("carol", "secret-c"), verify=ctx) \
            .status_code == 200
        assert httpx.get(w.rest.url + "/", auth=("alice", "wonderland"), verify=ctx) \
            .status_code == 401


@pytest.mark.parametrize("settings, key", [
    ({"listeners": "https://127.0.0.1:0"}, "listeners.https.ssl.keystore.location"),
    ({"listeners": "https://127.0.0.1:0", "ssl.keystore.location": "/nowhere/k.pem"},
     "ssl.keystore.location"),
    ({"listeners": "https://127.0.0.1:0", "ssl.keystore.location": "/x/k.jks"},
     "ssl.keystore.type"),
    ({"listeners": "https://127.0.0.1:0", "ssl.keystore.location": "P12",
      "ssl.keystore.password": "wrong"}, "ssl.keystore.location"),
    ({"rest.extension.classes": "basic"}, "rest.basic.auth.credentials.file"),
    ({"rest.extension.classes": "com.example.Other"}, "rest.extension.classes"),
    ({"listeners": "ftp://127.0.0.1:1"}, "listeners"),
])
def test_a_listener_that_cannot_work_stops_the_worker_naming_the_setting(tmp_path, tls_files,
                                                                          settings, key):
    settings = {k: (str(tls_files.server_p12) if v == "P12" else v) for k, v in settings.items()}
    with pytest.raises(KctlError) as e:
        WorkerConfig({"state.dir": str(tmp_path / "state"), **settings})
    assert key in e.value.errors, e.value.errors
    assert not (tmp_path / "state").exists()


def test_a_pkcs12_keystore_serves_https(tmp_path, tls_files):
    with secure_worker(tmp_path, tls_files, **{
            "listeners.https.ssl.keystore.location": str(tls_files.server_p12),
            "listeners.https.ssl.keystore.type": "PKCS12",
            "listeners.https.ssl.keystore.password": "store-pass"}) as w:
        r = httpx.get(w.rest.url + "/", auth=("alice", "wonderland"),
                      verify=ssl.create_default_context(cafile=tls_files.ca))
        assert r.status_code == 200


def test_a_worker_calls_other_workers_as_its_config_says(tmp_path, tls_files):
    creds = tmp_path / "users.properties"
    creds.write_text("first=one\nsecond=two\n")
    base = {"state.dir": str(tmp_path), "listeners": "https://127.0.0.1:0",
            "ssl.keystore.location": str(tls_files.server),
            "ssl.truststore.location": str(tls_files.ca),
            "rest.extension.classes": "basic", "rest.basic.auth.credentials.file": str(creds)}
    options = WorkerConfig(base).rest_client_options()
    assert options["auth"] == ("first", "one")
    assert isinstance(options["verify"], ssl.SSLContext)
    assert options["verify"].verify_mode == ssl.CERT_REQUIRED and options["verify"].check_hostname
    own = WorkerConfig({**base, "rest.basic.auth.user.info": "second:two"})
    assert own.rest_client_options()["auth"] == ("second", "two")
    assert WorkerConfig({"state.dir": str(tmp_path)}).rest_client_options() == {}


def test_an_unmodified_connect_client_from_pypi_drives_the_worker(worker, tls_files):
    """kafka-connect-py (requests underneath, as many Connect scripts are) verifies the
    worker against a CA file and sends Basic credentials: create, list, status, delete work,
    and a wrong password or an untrusted certificate gets nothing done."""
    import requests
    from kafka_connect import KafkaConnect
    from support.waiting import wait_until

    url = worker.rest.url
    client = KafkaConnect(url, auth="alice:wonderland", ssl_verify=str(tls_files.ca))
    created = client.create_connector({"name": "from-pypi", "config": SOURCE})
    assert created["name"] == "from-pypi" and created["config"]["topic"] == "t"
    assert client.list_connectors() == ["from-pypi"]
    status = wait_until(lambda: (s := client.get_connector_status("from-pypi"))
                        ["connector"]["state"] == "RUNNING" and s, timeout=30,
                        message="from-pypi RUNNING, as the client reads it")
    assert status["name"] == "from-pypi"
    wrong = KafkaConnect(url, auth="alice:looking-glass", ssl_verify=str(tls_files.ca))
    with pytest.raises(requests.HTTPError, match="401"):
        wrong.delete_connector("from-pypi")
    with pytest.raises(requests.HTTPError, match="401"):
        wrong.create_connector({"name": "sneaky", "config": SOURCE})
    untrusted = KafkaConnect(url, auth="alice:wonderland", ssl_verify=str(tls_files.other_ca))
    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusted.delete_connector("from-pypi")
    assert names(worker) == ["from-pypi"]
    client.delete_connector("from-pypi")
    assert client.list_connectors() == [] and names(worker) == []


def test_kctl_with_a_plaintext_url_to_an_https_worker_says_to_use_https(worker, tls_files):
    plain = worker.rest.url.replace("https://", "http://")
    r = kctl(plain, "--cacert", str(tls_files.ca), "connector", "create", "-", stdin=json.dumps(
        {"name": "plain", "config": SOURCE}),
        env={"KCTL_USER": "alice", "KCTL_PASSWORD": "wonderland"})
    assert r.returncode != 0
    assert "does the worker listen on https? use an https:// URL" in r.stderr, r.stderr
    assert "wonderland" not in r.stderr + r.stdout
    assert names(worker) == []


def test_the_schema_registry_is_served_under_the_same_tls_and_credentials(worker, tls_files):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    url = f"{worker.rest.url}/schema-registry"
    schema = Schema('{"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}',
                    "AVRO")
    with httpx.Client(verify=ssl.create_default_context(cafile=tls_files.ca), timeout=30) as c:
        assert c.get(f"{url}/subjects").status_code == 401
    anonymous = SchemaRegistryClient({"url": url, "ssl.ca.location": str(tls_files.ca)})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.register_schema("s-value", schema)
    assert refused.value.http_status_code == 401
    anonymous.close()  # (an open keep-alive connection holds the worker's stop)
    with SchemaRegistryClient({"url": url, "ssl.ca.location": str(tls_files.ca),
                               "basic.auth.user.info": "alice:wonderland"}) as alice:
        assert alice.register_schema("s-value", schema) == 1
        assert alice.get_subjects() == ["s-value"]
