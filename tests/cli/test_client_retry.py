"""The CLI waits out a rebalance: a write a cluster refuses with 409 while its group
rebalances (Kafka's answer) is tried again until `--timeout`, and the user is told once
why it waits. Any other 409 (a connector that exists) is the answer at once."""

from __future__ import annotations

import httpx
import pytest
from support.clock import FakeClock

from kctl.cli.client import Client, ClientError

REBALANCING = {"error_code": 409, "message": "Cannot complete request because of a "
               "conflicting operation (e.g. worker rebalance)"}


def client_of(answers: list[tuple[int, dict]], retry_for: float, heard: list[str],
              clock: FakeClock | None = None) -> tuple[Client, list[str]]:
    """A Client whose worker answers `answers` in turn (the last one from then on), waiting
    on a clock the test owns (a fresh one unless given)."""
    clock = clock or FakeClock()
    seen: list[str] = []

    def worker(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        status, body = answers[min(len(seen), len(answers)) - 1]
        return httpx.Response(status, json=body)

    client = Client("http://worker:8083", retry_for=retry_for, on_wait=heard.append,
                    monotonic=clock.monotonic, sleep=clock.sleep)
    client._http = httpx.Client(base_url=client.url, transport=httpx.MockTransport(worker))
    return client, seen


def test_a_write_refused_during_a_rebalance_is_retried_and_the_user_told_once():
    heard: list[str] = []
    created = {"name": "c1", "config": {}, "tasks": []}
    client, seen = client_of([(409, REBALANCING), (409, REBALANCING), (201, created)],
                             retry_for=10, heard=heard)
    assert client.request("POST", "/connectors", json={"name": "c1"}) == created
    assert seen == ["POST /connectors"] * 3
    assert heard == [REBALANCING["message"]]


def test_a_rebalance_that_outlasts_the_timeout_is_the_answer():
    heard: list[str] = []
    clock = FakeClock()
    client, seen = client_of([(409, REBALANCING)], retry_for=0.5, heard=heard, clock=clock)
    with pytest.raises(ClientError, match="rebalance") as e:
        client.request("PUT", "/connectors/c1/pause")
    assert e.value.status == 409
    # Tried at 0 s, again after 0.2 s; the next wait (0.4 s) would pass the 0.5 s deadline.
    assert seen == ["PUT /connectors/c1/pause"] * 2
    assert clock.now == pytest.approx(0.2)
    assert len(heard) == 1


@pytest.mark.parametrize("retry_for", [0.0, 10.0])
def test_other_conflicts_and_no_timeout_answer_at_once(retry_for):
    heard: list[str] = []
    exists = {"error_code": 409, "message": "Connector c1 already exists"}
    client, seen = client_of([(409, exists)], retry_for=retry_for, heard=heard)
    with pytest.raises(ClientError, match="already exists"):
        client.request("POST", "/connectors", json={"name": "c1"})
    assert seen == ["POST /connectors"] and heard == []

    client, seen = client_of([(409, REBALANCING)], retry_for=0.0, heard=heard)
    with pytest.raises(ClientError, match="rebalance"):
        client.request("POST", "/connectors", json={"name": "c1"})
    assert seen == ["POST /connectors"] and heard == []


@pytest.mark.parametrize("answer", ["reset", "tls"])
def test_a_plain_url_to_a_listener_that_resets_or_speaks_tls_suggests_https(answer):
    """What a TLS listener does to a plain HTTP request varies (an alert the client cannot
    read as HTTP, or a reset): both point the user at https://."""
    import socket
    import struct
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def listener() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        if answer == "reset":  # close with RST, not FIN
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:  # a TLS alert record: handshake failure
            conn.sendall(bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]))
        conn.close()

    t = threading.Thread(target=listener, daemon=True)
    t.start()
    client = Client(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=10)
    with pytest.raises(ClientError) as refused:
        client.request("GET", "/connectors")
    t.join(10)
    server.close()
    assert "does the worker listen on https? use an https:// URL" in str(refused.value)
