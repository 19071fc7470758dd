"""The broker's own cost of a rebalance round: one JoinGroup + SyncGroup, no kctl code.

Not a benchmark itself: `bench_group_broker.py` (kctl's group protocol in process) and
`bench_cluster_join.py` (worker processes) print their join times next to it, measured in
the same run on the same broker.
"""

from __future__ import annotations

import time
import uuid

# stands for a member's assignment (a Connect assignment's version header); its content
# does not matter to the broker, which hands it back as it is
ASSIGNMENT = b"\x00\x01\x00\x00\x00\x00"


def raw_round_trip(bootstrap: str, session_ms: int) -> float:
    """One lone member's JoinGroup (with the member-id round) and SyncGroup, kafka-python
    requests only: the broker's floor for any rebalance. `session_ms` matters: the test
    broker completes a JoinGroup after max(1 s, session.timeout/2)."""
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.consumer.group import (
        JoinGroupRequest,
        LeaveGroupRequest,
        SyncGroupRequest,
    )
    from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest

    client = KafkaNetClient(bootstrap_servers=bootstrap, client_id="raw")
    manager = client._manager
    manager._net.start()
    manager.bootstrap(10000)

    def call(request, node=None):
        async def send():
            return await manager.send(request, node_id=node, request_timeout_ms=60000)
        fut = manager._net.call_soon_with_future(send)
        while not fut.is_done:
            time.sleep(0.001)
        if fut.exception:
            raise fut.exception
        return fut.value

    try:
        group = f"bench-raw-{uuid.uuid4().hex[:8]}"
        found = call(FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]))
        node = manager.cluster.add_coordinator(found.coordinators[0], CoordinatorType.GROUP,
                                               group)

        def join(member_id: str):
            return call(JoinGroupRequest(
                group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=session_ms,
                member_id=member_id, group_instance_id=None, protocol_type="connect",
                protocols=[("sessioned", b"\x00\x02")], reason="bench", max_version=7), node)

        t0 = time.perf_counter()
        r = join("")
        if r.error_code == 79:  # MEMBER_ID_REQUIRED: join again with the id given
            r = join(r.member_id)
        if r.error_code:
            raise RuntimeError(f"JoinGroup failed with error {r.error_code}")
        # a non-empty assignment: the test broker holds a leader's SyncGroup whose
        # assignments are all empty for ~0.75 x session.timeout, then answers
        # REBALANCE_IN_PROGRESS (27): that would time a failure, not a round trip
        s = call(SyncGroupRequest(group_id=group, generation_id=r.generation_id,
                                  member_id=r.member_id, group_instance_id=None,
                                  protocol_type="connect", protocol_name=r.protocol_name,
                                  assignments=[(r.member_id, ASSIGNMENT)], max_version=5), node)
        took = time.perf_counter() - t0
        if s.error_code:
            raise RuntimeError(f"SyncGroup failed with error {s.error_code}")
        call(LeaveGroupRequest(group_id=group, member_id=r.member_id, members=[
            LeaveGroupRequest.MemberIdentity(member_id=r.member_id, group_instance_id=None,
                                             reason="done")]), node)
        return took
    finally:
        client.close()
