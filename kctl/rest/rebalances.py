"""kctl's REST extension for rebalances and groups (not part of Kafka Connect's API).

Any worker answers: the generation records every worker wrote are in the status topic,
which each worker reads whole.

    GET /rebalances                      the cluster's generations, explain's document
    GET /rebalances/timeline             the same as one self-contained HTML page
    GET /rebalances/{generation}/replay  the leader's recorded inputs run again
    GET /groups                          the worker group and the sink connectors' groups
    GET /groups/{group}                  one of them described, each field's source named
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from kctl.errors import NotFoundError
from kctl.rebalance.history import cluster_history, filter_rounds, parse_since, replay
from kctl.rebalance.timeline import render_html
from kctl.runtime.herder import Herder

__all__ = ["ERRORS", "rebalance_router"]

# the error answers of each operation, for the OpenAPI document (rest/app.py)
ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("get", "/rebalances"): (400, 404),
    ("get", "/rebalances/timeline"): (400,),
    ("get", "/rebalances/{generation}/replay"): (400, 404),
    ("get", "/groups"): (),
    ("get", "/groups/{group}"): (404,),
}

_SINK_GROUP_PREFIX = "connect-"
# `since`: a duration back from now (90s, 15m, 2h, 1d) or epoch milliseconds (the CLI turns
# an ISO-8601 time into these)
SINCE_PATTERN = r"^\d{1,15}( ?(ms|s|m|h|d))?$"
_SINCE = Query(default=None, pattern=SINCE_PATTERN,
               description="90s, 15m, 2h, 1d back from now, or epoch milliseconds")


def _records(herder: Herder) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    statuses = getattr(herder, "statuses", None)
    if statuses is None or not hasattr(statuses, "generations"):
        return [], []
    departures = [v["generation"] for k, v in statuses.records().items()
                  if k.startswith("departure-") and isinstance(v.get("generation"), dict)]
    return statuses.generations(), departures


def _history(herder: Herder, last: int | None, connector: str | None, since: str | None,
             generation: int | None, clock: Callable[[], float]) -> dict[str, Any]:
    records, departures = _records(herder)
    since_ms = parse_since(since, int(clock() * 1000)) if since else None
    return filter_rounds(cluster_history(records, departures), last=last, connector=connector,
                         since_ms=since_ms, generation=generation)


def rebalance_router(herder: Herder, clock: Callable[[], float] = time.time) -> APIRouter:
    router = APIRouter()

    @router.get("/rebalances", summary="The cluster's recent rebalances (kctl extension)")
    def rebalances(last: int | None = Query(default=None, ge=0),
                   connector: str | None = None, since: str | None = _SINCE,
                   generation: int | None = None) -> Any:
        """Every worker's records merged, one round per generation, in the document
        `kctl rebalance explain -o json` writes."""
        return _history(herder, last, connector, since, generation, clock)

    @router.get("/rebalances/timeline", response_class=HTMLResponse,
                summary="The cluster's rebalances as a timeline page (kctl extension)")
    def timeline(last: int | None = Query(default=None, ge=0), connector: str | None = None,
                 since: str | None = _SINCE) -> HTMLResponse:
        doc = _history(herder, last, connector, since, None, clock)
        title = f"kctl rebalances · {_group_id(herder) or herder.worker_id}"
        return HTMLResponse(render_html([doc], title=title))

    @router.get("/rebalances/{generation}/replay",
                summary="Run a generation's recorded assignor inputs again (kctl extension)")
    def replay_generation(generation: int) -> Any:
        records, _ = _records(herder)
        return replay(records, generation)

    @router.get("/groups", summary="The worker group and the sink connectors' consumer groups")
    def groups() -> Any:
        return {"worker_group": _group_id(herder),
                "groups": [_group_id(herder), *(_SINK_GROUP_PREFIX + n for n in _sinks(herder))]}

    @router.get("/groups/{group}", summary="One group described (kctl extension)")
    def describe(group: str) -> Any:
        if group == _group_id(herder):
            return describe_worker_group(herder, group)
        name = group.removeprefix(_SINK_GROUP_PREFIX)
        if group.startswith(_SINK_GROUP_PREFIX) and name in _sinks(herder):
            return describe_sink_group(herder, name)
        raise NotFoundError(f"group {group} is neither this cluster's worker group "
                            f"({_group_id(herder)}) nor a sink connector's (connect-<name>)")

    return router


def _group_id(herder: Herder) -> str:
    cfg = getattr(herder, "worker_config", None)
    return str(cfg.get("group.id") or "") if cfg is not None else ""


def _bootstrap(herder: Herder) -> str:
    cfg = getattr(herder, "worker_config", None)
    value = cfg.get("bootstrap.servers") if cfg is not None else None
    return ",".join(value) if isinstance(value, list | tuple) else str(value or "")


def _sinks(herder: Herder) -> list[str]:
    out = []
    for name in herder.connectors():
        try:
            if herder.connector_info(name).type.value == "sink":
                out.append(name)
        except NotFoundError:
            continue
    return out


# --------------------------------------------------------------------------- describe


def describe_worker_group(herder: Herder, group: str) -> dict[str, Any]:
    """The broker's DescribeGroups answer where it gives one, the workers' generation
    records (the latest generation) for the rest; `sources` names where each field came
    from."""
    records, _ = _records(herder)
    history = cluster_history(records)
    latest = history["rounds"][-1] if history["rounds"] else None
    broker: dict[str, Any] = {}
    broker_error = ""
    bootstrap = _bootstrap(herder)
    if bootstrap:
        try:
            from kctl.transport.group_admin import describe_group

            broker = describe_group(bootstrap, group, client_id=f"{herder.worker_id}-describe",
                                    security=herder.worker_config.kafka_security())
        except Exception as e:  # describe what the records say, and why the broker did not
            broker_error = str(e)
    by_member = {m["member_id"]: m for m in broker.get("members", ())}
    urls = {str(r["worker"]): str(r.get("url") or "") for r in records}
    member_ids = {str(r["worker"]): str(r["member_id"]) for r in records
                  if latest and r["generation"] == latest["generation"]}
    members = []
    for worker in (latest or {}).get("members", ()):
        member_id = member_ids.get(worker, "")
        said = by_member.get(member_id, {})
        work = (latest or {}).get("assignments", {}).get(worker, {})
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
        "protocol": broker.get("protocol") or (latest or {}).get("protocol", ""),
        "generation": (latest or {}).get("generation"),
        "leader": (latest or {}).get("leader", ""),
        "leader_url": urls.get((latest or {}).get("leader", ""), ""),
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


def describe_sink_group(herder: Herder, connector: str) -> dict[str, Any]:
    """A sink connector's consumer group: its tasks (members, from the status topic), the
    committed offsets (the group's, as `connector offsets` reads them) and the lag against
    each partition's end."""
    group = _SINK_GROUP_PREFIX + connector
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
    worker = getattr(herder, "worker", None)
    ends: dict[tuple[str, int], int] = {}
    problem = ""
    if worker is not None and topics:
        try:
            ends = _end_offsets(worker, topics)
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


def _end_offsets(worker: Any, topics: list[str]) -> dict[tuple[str, int], int]:
    from kctl.api.records import TopicPartition

    transport = worker.transport
    admin = transport.admin()
    parts = [TopicPartition(t, p) for t in topics
             for p in range(admin.describe_topic(t).partitions)]
    consumer = transport.consumer(None, {"kctl.passive": "true"})
    try:
        return {(tp.topic, tp.partition): int(off)
                for tp, off in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()
