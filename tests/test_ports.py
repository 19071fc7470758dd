"""Ports handed to the test servers are never handed out twice in a session."""

from __future__ import annotations

from support import broker


def test_free_ports_are_never_repeated_in_a_session():
    ports = [broker.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)

