"""The cluster's rebalances and groups as a herder tells them (kctl's extension).

The generation records every worker wrote are in the status store, which each worker reads
whole, so any worker answers for the cluster. A worker group is described from what the
broker says (DescribeGroups) and those records; a sink connector's consumer group from its
tasks' statuses, its committed offsets and the ends of its topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl.api.records import TopicPartition
from kctl.errors import NotFoundError
from kctl.rebalance.history import cluster_history, filter_rounds, replay
from kctl.states import ConnectorType
from kctl.storage.status import StatusBackingStore

if TYPE_CHECKING:
    from kctl.runtime.abstract_herder import AbstractHerder
    from kctl.transport.base import Transport

__all__ = ["SINK_GROUP_PREFIX", "Groups", "describe_group", "generation_records",
           "rebalance_history", "replay_generation"]

SINK_GROUP_PREFIX = "connect-"


@dataclass(frozen=True)
class Groups:
    """The worker group (empty for a standalone worker) and every group of the cluster."""

    worker_group: str
    groups: tuple[str, ...]


def generation_records(statuses: StatusBackingStore
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every worker's generation records, and the departure notes workers left."""
    departures = [v["generation"] for k, v in statuses.records().items()
                  if k.startswith("departure-") and isinstance(v.get("generation"), dict)]
    return statuses.generations(), departures


def rebalance_history(statuses: StatusBackingStore, *, last: int | None, connector: str | None,
                      since_ms: int | None, generation: int | None) -> dict[str, Any]:
    """One round per generation, in the document `kctl rebalance explain -o json` writes."""
    records, departures = generation_records(statuses)
    return filter_rounds(cluster_history(records, departures), last=last, connector=connector,
                         since_ms=since_ms, generation=generation)


def replay_generation(statuses: StatusBackingStore, generation: int) -> dict[str, Any]:
    records, _ = generation_records(statuses)
    return replay(records, generation)


def sinks(herder: AbstractHerder) -> list[str]:
    out = []
    for name in herder.connectors():
        try:
            if herder.connector_info(name).type is ConnectorType.SINK:
                out.append(name)
        except NotFoundError:  # deleted meanwhile
            continue
    return out


def groups(herder: AbstractHerder) -> Groups:
    worker_group = herder.worker_group()
    return Groups(worker_group,
                  (worker_group, *(SINK_GROUP_PREFIX + n for n in sinks(herder))))


def describe_group(herder: AbstractHerder, group: str) -> dict[str, Any]:
    """The worker group or a sink connector's group; NotFoundError for any other."""
    worker_group = herder.worker_group()
    if group == worker_group:
        return describe_worker_group(herder, group)
    name = group.removeprefix(SINK_GROUP_PREFIX)
    if group.startswith(SINK_GROUP_PREFIX) and name in sinks(herder):
        return describe_sink_group(herder, name)
    raise NotFoundError(f"group {group} is neither this cluster's worker group "
                        f"({worker_group}) nor a sink connector's (connect-<name>)")


def _ask_broker(herder: AbstractHerder, group: str) -> tuple[dict[str, Any], str]:
    """The broker's DescribeGroups answer, or why there is none."""
    bootstrap, security = herder.group_broker()
    if not bootstrap:
        return {}, ""
    try:
        from kctl.transport.group_admin import describe_group as ask

        return ask(bootstrap, group, client_id=f"{herder.worker_id}-describe",
                   security=security), ""
    except Exception as e:  # describe what the records say, and why the broker did not
        return {}, str(e)


def describe_worker_group(herder: AbstractHerder, group: str) -> dict[str, Any]:
    """The broker's DescribeGroups answer where it gives one, the workers' generation
    records (the latest generation) for the rest; `sources` names where each field came
    from."""
    records, _ = generation_records(herder.statuses)
    history = cluster_history(records)
    latest: Mapping[str, Any] = history["rounds"][-1] if history["rounds"] else {}
    broker, broker_error = _ask_broker(herder, group)
    by_member = {m["member_id"]: m for m in broker.get("members", ())}
    urls = {str(r["worker"]): str(r.get("url") or "") for r in records}
    member_ids = {str(r["worker"]): str(r["member_id"]) for r in records
                  if latest and r["generation"] == latest["generation"]}
    members = []
    for worker in latest.get("members", ()):
        member_id = member_ids.get(worker, "")
        said = by_member.get(member_id, {})
        work = latest.get("assignments", {}).get(worker, {})
        sources = {"member_id": "worker records", "connectors": "worker records",
                   "tasks": "worker records"}
        member = {"worker": worker, "member_id": member_id, "client_id": worker,
                  "url": urls.get(worker) or said.get("url", ""),
                  "connectors": list(work.get("connectors", ())),
                  "tasks": list(work.get("tasks", ())), "sources": sources}
        sources["client_id"] = "broker" if said.get("client_id") else "worker records"
        if said.get("client_id"):
            member["client_id"] = said["client_id"]
        sources["url"] = "worker records" if urls.get(worker) else "broker"
        if said.get("client_host"):
            member["client_host"] = said["client_host"]
            sources["client_host"] = "broker"
        if said.get("assignment"):
            sources["assignment"] = "broker"
            member["broker_assignment"] = said["assignment"]
        members.append(member)
    protocol_from_broker = bool(broker.get("protocol"))
    return {
        "group": group,
        "kind": "workers",
        "state": broker.get("state") or ("Stable" if latest else "Unknown"),
        "protocol_type": broker.get("protocol_type") or "connect",
        "protocol": broker.get("protocol") or latest.get("protocol", ""),
        "generation": latest.get("generation"),
        "leader": latest.get("leader", ""),
        "leader_url": urls.get(latest.get("leader", ""), ""),
        "members": members,
        "broker_members": sorted(by_member),
        "sources": {
            "state": "broker" if broker.get("state") else "worker records",
            "protocol": "broker" if protocol_from_broker else "worker records",
            "generation": "worker records", "leader": "worker records",
            "members": "worker records (the broker lists member ids only)"
            if by_member and not any(m.get("client_id") for m in by_member.values())
            else ("broker and worker records" if by_member else "worker records"),
        },
        **({"broker_error": broker_error} if broker_error else {}),
    }


def describe_sink_group(herder: AbstractHerder, connector: str) -> dict[str, Any]:
    """A sink connector's consumer group: its tasks (members, from the status topic), the
    committed offsets (the group's, as `connector offsets` reads them) and the lag against
    each partition's end."""
    group = SINK_GROUP_PREFIX + connector
    status = herder.connector_status(connector)
    members = [{"task": f"{connector}-{t.task}", "worker": t.worker_id, "state": t.state.value}
               for t in status.tasks]
    committed = {}
    for entry in herder.connector_offsets(connector):
        p, o = entry.get("partition") or {}, entry.get("offset") or {}
        if "kafka_topic" in p:
            committed[(str(p["kafka_topic"]), int(p["kafka_partition"]))] = o.get("kafka_offset")
    topics = [t.strip() for t in herder.connector_config(connector).get("topics", "").split(",")
              if t.strip()]
    ends: dict[tuple[str, int], int] = {}
    problem = ""
    if herder.worker is not None and topics:
        try:
            ends = _end_offsets(herder.worker.transport, topics)
        except Exception as e:
            problem = str(e)
    partitions = []
    for topic, part in sorted(set(ends) | set(committed)):
        offset, end = committed.get((topic, part)), ends.get((topic, part))
        # an end below the committed offset is a broker's short answer: the lag is unknown
        lag = None if end is None or end < (offset or 0) else end - (offset or 0)
        partitions.append({"topic": topic, "partition": part, "committed": offset, "end": end,
                           "lag": lag})
    known = [p["lag"] for p in partitions if p["lag"] is not None]
    return {
        "group": group, "kind": "sink", "connector": connector,
        "state": status.state.value,
        "members": members, "partitions": partitions,
        "lag": sum(known) if known and len(known) == len(partitions) else None,
        "sources": {"members": "status topic (one member per sink task)",
                    "committed": "the group's committed offsets (OffsetFetch)",
                    "end": "ListOffsets (where a broker answers an end below the committed "
                           "offset, the lag is unknown)"},
        **({"error": problem} if problem else {}),
    }


def _end_offsets(transport: Transport, topics: list[str]) -> dict[tuple[str, int], int]:
    admin = transport.admin()
    parts = [TopicPartition(t, p) for t in topics
             for p in range(admin.describe_topic(t).partitions)]
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    try:
        return {(tp.topic, tp.partition): int(off)
                for tp, off in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()
