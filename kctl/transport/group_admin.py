"""What the broker says about a group (DescribeGroups), for `kctl group describe`.

Kafka answers with the state, the protocol, and each member's client id, host, metadata
and assignment; some Kafka-protocol brokers answer less (the test broker, Tansu, leaves
fields empty). The answer is returned as found, each member's metadata and assignment
decoded where they are Connect's, so the caller can tell what the broker said from what
it must take from the workers' own records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kctl.errors import TransportError

__all__ = ["describe_group"]


def describe_group(bootstrap_servers: str, group_id: str, *, client_id: str = "kctl-describe",
                   security: Mapping[str, Any] | None = None,
                   timeout_ms: int = 10_000) -> dict[str, Any]:
    """{"group_id", "state", "protocol_type", "protocol", "members": [{member_id, client_id,
    client_host, metadata, assignment}]} as the group's coordinator answers DescribeGroups.

    `security` is the worker's own security.protocol, ssl.* and sasl.* (Kafka's names): a
    cluster that takes only TLS or SASL answers the worker's other clients, so this one
    must speak the same way."""
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from kctl.transport.security import kafka_python_config

    client = KafkaNetClient(bootstrap_servers=bootstrap_servers, client_id=client_id,
                            **kafka_python_config(security or {}))
    try:
        manager = client._manager
        manager._net.start()
        manager.bootstrap(timeout_ms)
        found = _call(manager, FindCoordinatorRequest(key=group_id, key_type=0,
                                                      coordinator_keys=[group_id]),
                      None, timeout_ms)
        result = found.coordinators[0] if getattr(found, "coordinators", None) else found
        if result.error_code != 0:
            raise TransportError(f"no coordinator for group {group_id} "
                                 f"(error {result.error_code})")
        node = result.node_id
        manager.cluster.add_coordinator(result, 0, group_id)  # type: ignore[arg-type]
        answer = _call(manager, DescribeGroupsRequest(groups=[group_id], max_version=4),
                       node, timeout_ms)
        group = answer.groups[0]
        return {
            "group_id": group_id,
            "error_code": group.error_code,
            "state": group.group_state or "",
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_data or "",
            "members": [_member(group.protocol_type or "", group.protocol_data or "", m)
                        for m in group.members],
        }
    finally:
        client.close()


def _member(protocol_type: str, protocol: str, m: Any) -> dict[str, Any]:
    metadata, assignment = bytes(m.member_metadata or b""), bytes(m.member_assignment or b"")
    out: dict[str, Any] = {"member_id": m.member_id, "client_id": m.client_id or "",
                           "client_host": m.client_host or "",
                           "metadata_bytes": len(metadata), "assignment_bytes": len(assignment)}
    if protocol_type == "connect":
        from kctl.group.connect_coordinator import decode_assignment, decode_metadata

        try:
            if metadata:
                meta = decode_metadata(metadata)
                out["url"] = meta.url
                out["config_offset"] = meta.config_offset
            if assignment:
                out["assignment"] = decode_assignment(assignment).to_json()
        except Exception as e:  # a broker that answers something else: say so, do not fail
            out["decode_error"] = str(e)
    return out


def _call(manager: Any, request: Any, node: Any, timeout_ms: int) -> Any:
    async def send() -> Any:
        return await manager.send(request, node_id=node, request_timeout_ms=timeout_ms)

    future = manager._net.call_soon_with_future(send)
    end = time.monotonic() + timeout_ms / 1000
    while not future.is_done and time.monotonic() < end:
        time.sleep(0.01)
    if not future.is_done:
        raise TransportError(f"{type(request).__name__} to the Kafka cluster timed out")
    if future.exception is not None:
        raise TransportError(f"{type(request).__name__} failed: {future.exception}")
    return future.value
