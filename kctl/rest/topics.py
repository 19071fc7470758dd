"""kctl's REST extension for looking inside topics (not part of Kafka Connect's API).

Read only and bounded: an answer holds at most `MAX_RECORDS` records and `MAX_BYTES` bytes
and waits at most `MAX_WAIT_MS` for records to come; a reader asks again from `next`.
The paths sit behind the same authentication as every other path (rest/auth.py is
middleware around the whole app), and any worker of a cluster answers: each reads the log.

    GET /topics                       every topic: name, partitions
    GET /topics/{topic}               partitions, start and end offsets, value schemas seen
    GET /topics/{topic}/records       records decoded, `kcat -C` style
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from kctl.rest.deps import HerderDep
from kctl.rest.errors import answers
from kctl.runtime.topics import MAX_BYTES, MAX_RECORDS, MAX_WAIT_MS, ReadRequest

__all__ = ["router"]

POSITIONS_PATTERN = r"^\d{1,6}:\d{1,19}(,\d{1,6}:\d{1,19})*$"
# a converter's alias (json, string, bytes), Kafka class name or Python dotted path
CONVERTER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$"


class TopicSummary(BaseModel):
    name: str
    partitions: int


class TopicList(BaseModel):
    topics: list[TopicSummary]


class PartitionInfo(BaseModel):
    partition: int
    start_offset: int = Field(description="The first offset the partition still holds")
    end_offset: int = Field(description="The offset the next record will get")
    records: int = Field(description="end_offset - start_offset")


class SchemaVersion(BaseModel):
    version: int = Field(description="1 for the first schema seen, 2 for the next, ...")
    id: str | None = Field(description="A short hash of the schema (records name it)")
    first_partition: int
    first_offset: int
    first_timestamp: int
    records: int = Field(description="How many of the records scanned carry it")
    schema_: dict[str, Any] | None = Field(alias="schema", serialization_alias="schema",
                                           description="Kafka's schema JSON")


class TopicDescription(BaseModel):
    name: str
    partitions: list[PartitionInfo]
    records_scanned: int = Field(description="Records whose schemas were looked at: the "
                                             "first and last ones of each partition")
    schemas: list[SchemaVersion]
    decoded_by: str


class TopicRecord(BaseModel):
    partition: int
    offset: int
    timestamp: int = Field(description="Epoch milliseconds")
    time: str = Field(description="The timestamp in ISO-8601, UTC")
    headers: list[tuple[str, str | None]]
    key: Any = None
    value: Any = None
    schema_: str | None = Field(alias="schema", serialization_alias="schema",
                                description="The id of the value's schema (describe lists "
                                            "them)")
    errors: list[str] = Field(description="Parts the converters could not decode (shown as "
                                          "text)")


class Limits(BaseModel):
    max_records: int
    max_bytes: int
    max_wait_ms: int


class TopicRecords(BaseModel):
    topic: str
    decoded_by: str = Field(description="Whose converters decoded the records")
    records: list[TopicRecord]
    next: dict[str, int] = Field(description="Partition -> where the next page starts "
                                             "(pass as `positions`)")
    end: dict[str, int] = Field(description="Partition -> its end offset when read")
    more: bool = Field(description="Whether records remain before the end")
    limits: Limits


def _positions(text: str | None) -> dict[int, int]:
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        p, o = part.split(":")
        out[int(p)] = int(o)
    return out


router = APIRouter(tags=["topics"])


@router.get("/topics", response_model=TopicList, response_model_by_alias=True)
def topics(herder: HerderDep) -> Any:
    return {"topics": herder.list_topics()}

@router.get("/topics/{topic}", response_model=TopicDescription,
            response_model_by_alias=True, responses=answers(400, 404))
def describe(herder: HerderDep, topic: str,
             connector: str | None = Query(None, description="Decode values with this "
                                                             "connector's converter"),
             value_converter: str | None = Query(None, pattern=CONVERTER_PATTERN)
             ) -> Any:
    return herder.describe_topic(topic, connector, value_converter)

@router.get("/topics/{topic}/records", response_model=TopicRecords,
            response_model_by_alias=True, responses=answers(400, 404))
def records(
    herder: HerderDep,
    topic: str,
    start: Literal["beginning", "end", "offset", "last"] = Query(
        "beginning", alias="from", description="Where each partition is read from"),
    offset: int = Query(0, ge=0, description="from=offset: this offset"),
    last: int = Query(0, ge=0, description="from=last: this many before the end"),
    partition: int | None = Query(None, ge=0),
    positions: str | None = Query(None, pattern=POSITIONS_PATTERN,
                                  description="partition:offset,... from an earlier "
                                              "answer's `next` (overrides `from`)"),
    max_records: int = Query(100, alias="max", ge=1, le=MAX_RECORDS),
    max_bytes: int = Query(MAX_BYTES, ge=1, le=MAX_BYTES),
    wait_ms: int = Query(0, ge=0, le=MAX_WAIT_MS,
                         description="How long to wait for records not there yet"),
    connector: str | None = Query(None, description="Decode with this connector's "
                                                    "converters"),
    key_converter: str | None = Query(None, pattern=CONVERTER_PATTERN),
    value_converter: str | None = Query(None, pattern=CONVERTER_PATTERN),
) -> Any:
    request = ReadRequest(start=start, offset=offset, last=last, partition=partition,
                          positions=_positions(positions), max_records=max_records,
                          max_bytes=max_bytes, wait_ms=wait_ms)
    return herder.read_topic(topic, request, connector, key_converter, value_converter)
