"""Looking inside a topic over REST: what a source wrote, decoded, page by page.

An in-process worker on the embedded log runs a counter source; `/topics` lists its topic,
`/topics/{topic}` tells its offsets and the value schema its records carry, and
`/topics/{topic}/records` gives the records decoded by the connector's converters, bounded
per answer, with where to read on.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.waiting import wait_until

from kctl.launch import StandaloneWorker
from kctl.runtime.topics import MAX_RECORDS
from kctl.runtime.worker_config import WorkerConfig

COUNTER = "support.connectors.CounterSourceConnector"


@pytest.fixture
def api(tmp_path) -> Iterator[httpx.Client]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100}))
    w.start()
    try:
        with httpx.Client(base_url=w.rest.url, timeout=30) as client:
            yield client
    finally:
        w.stop()


def counted(api: httpx.Client, name: str, topic: str, count: int, **extra) -> None:
    """A counter source writing `count` records per task, and the wait until all are in."""
    r = api.post("/connectors", json={"name": name, "config": {
        "connector.class": COUNTER, "topic": topic, "count": count, **extra}})
    assert r.status_code == 201, r.text
    tasks = int(extra.get("tasks.max", 1))

    def written() -> bool:
        answer = api.get(f"/topics/{topic}")
        return answer.status_code == 200 and \
            sum(p["records"] for p in answer.json()["partitions"]) == count * tasks

    wait_until(written, 30, message=f"{count * tasks} records in {topic}")


def test_a_sources_records_read_back_decoded_with_offsets_and_schema(api):
    counted(api, "counter", "numbers", 30)
    assert {"name": "numbers", "partitions": 1} in api.get("/topics").json()["topics"]

    described = api.get("/topics/numbers", params={"connector": "counter"}).json()
    assert described["partitions"] == [{"partition": 0, "start_offset": 0, "end_offset": 30,
                                        "records": 30}]
    [schema] = described["schemas"]
    assert schema["version"] == 1 and schema["records"] == 30
    assert schema["first_offset"] == 0 and schema["schema"]["type"] == "int64"

    page = api.get("/topics/numbers/records", params={"connector": "counter", "max": 10}).json()
    assert page["decoded_by"] == "connector counter"
    assert [(r["partition"], r["offset"], r["value"]) for r in page["records"]] == \
        [(0, i, i) for i in range(10)]
    assert all(r["schema"] == schema["id"] and not r["errors"] for r in page["records"])
    assert page["next"] == {"0": 10} and page["more"] is True

    rest = api.get("/topics/numbers/records", params={"positions": "0:10", "max": 100}).json()
    assert [r["value"] for r in rest["records"]] == list(range(10, 30))
    assert rest["next"] == {"0": 30} and rest["more"] is False
    assert rest["decoded_by"] == "worker defaults"


def test_last_and_offset_choose_where_each_partition_is_read_from(api):
    counted(api, "counter", "numbers", 30)
    last = api.get("/topics/numbers/records", params={"from": "last", "last": 3}).json()
    assert [r["offset"] for r in last["records"]] == [27, 28, 29]
    at = api.get("/topics/numbers/records",
                 params={"from": "offset", "offset": 25, "partition": 0, "max": 2}).json()
    assert [r["value"] for r in at["records"]] == [25, 26]
    end = api.get("/topics/numbers/records", params={"from": "end"}).json()
    assert end["records"] == [] and end["next"] == {"0": 30}


def test_other_converters_show_the_bytes_another_way_and_say_what_they_could_not_decode(api):
    counted(api, "counter", "numbers", 3)
    raw = api.get("/topics/numbers/records",
                  params={"value_converter": "StringConverter"}).json()
    assert raw["decoded_by"] == "options"
    assert raw["records"][0]["value"].startswith('{"schema":')
    # a converter named by its Kafka class name decodes the envelope as the worker does
    schemaless = api.get("/topics/numbers/records", params={
        "value_converter": "org.apache.kafka.connect.json.JsonConverter"}).json()
    assert schemaless["records"][2]["value"] == 2


def test_answers_are_bounded_and_bad_requests_are_named(api):
    counted(api, "counter", "numbers", 5)
    assert api.get("/topics/nothing-here").status_code == 404
    assert api.get("/topics/nothing-here/records").status_code == 404
    r = api.get("/topics/numbers/records", params={"max": MAX_RECORDS + 1})
    assert r.status_code == 400 and r.json()["error_code"] == 400
    assert api.get("/topics/numbers/records", params={"partition": 3}).status_code == 404
    assert api.get("/topics/numbers/records",
                   params={"positions": "zero"}).status_code == 400
    small = api.get("/topics/numbers/records", params={"max_bytes": 1}).json()
    assert len(small["records"]) == 1 and small["more"]  # the first always comes
    assert small["limits"]["max_records"] == MAX_RECORDS
    assert api.get("/topics/numbers/records",
                   params={"connector": "no-such"}).status_code == 404
    # a converter's name is an alias or a dotted path; an unknown topic is 404 whatever it is
    assert api.get("/topics/numbers", params={"value_converter": "\\"}).status_code == 400
    assert api.get("/topics/nothing-here",
                   params={"value_converter": "no.such.Converter"}).status_code == 404
    assert api.get("/topics/numbers/records",
                   params={"value_converter": "no.such.Converter"}).status_code == 400


def test_topics_ask_for_the_same_credentials_as_every_other_path(tmp_path):
    creds = tmp_path / "credentials.properties"
    creds.write_text("alice=wonderland\n")
    w = StandaloneWorker(WorkerConfig({
        "state.dir": str(tmp_path / "state"), "listeners": "http://127.0.0.1:0",
        "rest.extension.classes": "basic", "rest.basic.auth.credentials.file": str(creds)}))
    w.start()
    try:
        with httpx.Client(base_url=w.rest.url, timeout=30) as anonymous:
            for path in ("/topics", "/topics/t", "/topics/t/records"):
                assert anonymous.get(path).status_code == 401, path
                assert anonymous.get(path, auth=("alice", "looking-glass")).status_code == 401
            assert anonymous.get("/topics", auth=("alice", "wonderland")).status_code == 200
            assert anonymous.get("/topics/t/records",
                                 auth=("alice", "wonderland")).status_code == 404
    finally:
        w.stop()
