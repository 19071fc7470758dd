"""kctl's REST extension for rebalances and groups (not part of Kafka Connect's API).

Any worker answers, through its herder: the generation records every worker wrote are in
the status topic, which each worker reads whole.

    GET /rebalances                      the cluster's generations, explain's document
    GET /rebalances/timeline             the same as one self-contained HTML page
    GET /rebalances/{generation}/replay  the leader's recorded inputs run again
    GET /groups                          the worker group and the sink connectors' groups
    GET /groups/{group}                  one of them described, each field's source named
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from kctl.rebalance.history import parse_since
from kctl.rebalance.timeline import render_html
from kctl.rest.deps import ClockDep, HerderDep
from kctl.rest.errors import answers, json_answers
from kctl.rest.models import GenerationReplay, GroupDescription, Groups, RebalanceHistory
from kctl.runtime.herder import Herder

__all__ = ["describe_worker_group", "router"]

# `since`: a duration back from now (90s, 15m, 2h, 1d) or epoch milliseconds (the CLI turns
# an ISO-8601 time into these)
SINCE_PATTERN = r"^\d{1,15}( ?(ms|s|m|h|d))?$"
_SINCE = Query(default=None, pattern=SINCE_PATTERN,
               description="90s, 15m, 2h, 1d back from now, or epoch milliseconds")
_LAST = Query(default=None, ge=0)

router = APIRouter()


def _history(herder: Herder, clock: Callable[[], float], last: int | None, connector: str | None,
             since: str | None, generation: int | None) -> dict[str, Any]:
    since_ms = parse_since(since, int(clock() * 1000)) if since else None
    return herder.rebalance_history(last=last, connector=connector, since_ms=since_ms,
                                    generation=generation)


@router.get("/rebalances", summary="The cluster's recent rebalances (kctl extension)",
            response_model=RebalanceHistory, responses=answers(400, 404))
def rebalances(herder: HerderDep, clock: ClockDep, last: int | None = _LAST,
               connector: str | None = None, since: str | None = _SINCE,
               generation: int | None = None) -> Any:
    """Every worker's records merged, one round per generation, in the document
    `kctl rebalance explain -o json` writes."""
    return _history(herder, clock, last, connector, since, generation)


@router.get("/rebalances/timeline", response_class=HTMLResponse,
            summary="The cluster's rebalances as a timeline page (kctl extension)",
            responses=json_answers(400))
def timeline(herder: HerderDep, clock: ClockDep, last: int | None = _LAST,
             connector: str | None = None, since: str | None = _SINCE) -> HTMLResponse:
    doc = _history(herder, clock, last, connector, since, None)
    title = f"kctl rebalances · {herder.groups().worker_group or herder.worker_id}"
    return HTMLResponse(render_html([doc], title=title))


@router.get("/rebalances/{generation}/replay",
            summary="Run a generation's recorded assignor inputs again (kctl extension)",
            response_model=GenerationReplay, responses=answers(400, 404))
def replay_generation(generation: int, herder: HerderDep) -> Any:
    return herder.replay_generation(generation)


@router.get("/groups", summary="The worker group and the sink connectors' consumer groups",
            response_model=Groups)
def groups(herder: HerderDep) -> Any:
    found = herder.groups()
    return {"worker_group": found.worker_group, "groups": list(found.groups)}


def describe_worker_group(herder: Herder, group: str) -> dict[str, Any]:
    """What GET /groups/{group} answers for the worker group (`kctl group describe`)."""
    return herder.describe_group(group)


@router.get("/groups/{group}", summary="One group described (kctl extension)",
            response_model=GroupDescription, responses=answers(404))
def describe(group: str, herder: HerderDep) -> Any:
    return herder.describe_group(group)
