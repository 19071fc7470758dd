"""The registry's semantics, as Confluent's documents them, on a log held in memory: every
change is a record, and a registry that reads the same records holds the same state."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.runtime.registry import RegistryError, SchemaRegistry


class MemoryLog:
    """The registry's topic: records appended in order, applied when read back."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.readers: list[SchemaRegistry] = []

    def append(self, key: bytes, value: bytes | None) -> None:
        self.records.append((key, value))

    def read_to_end(self) -> None:
        for reader in self.readers:
            done = getattr(reader, "_applied", 0)
            for key, value in self.records[done:]:
                reader.apply(key, value)
            reader._applied = len(self.records)  # type: ignore[attr-defined]


def registry() -> tuple[SchemaRegistry, MemoryLog]:
    log = MemoryLog()
    r = SchemaRegistry(log)
    log.readers.append(r)
    return r, log


def record(*fields: tuple[str, str]) -> str:
    return json.dumps({"type": "record", "name": "order", "fields": [
        {"name": n, "type": t} if not t.startswith("?") else
        {"name": n, "type": ["null", t[1:]], "default": None} for n, t in fields]})


V1 = record(("id", "long"))
V2 = record(("id", "long"), ("note", "?string"))            # a new optional field
V3 = record(("id", "long"), ("note", "?string"), ("qty", "int"))  # a new required field
V_STRING_ID = record(("id", "string"))


def error(fn, *args, **kwargs) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        fn(*args, **kwargs)
    return caught.value


def test_a_subject_grows_by_compatible_versions_and_refuses_an_incompatible_one():
    r, _ = registry()
    assert r.register("orders-value", V1).id == 1
    assert r.register("orders-value", V1).id == 1, "the same schema again is the same version"
    assert (r.register("orders-value", V2).id, r.versions("orders-value")) == (2, [1, 2])
    refused = error(r.register, "orders-value", V3)  # BACKWARD: qty has no default
    assert (refused.status, refused.error_code) == (409, 409)
    assert "orders-value" in str(refused) and "qty" in str(refused)
    assert r.versions("orders-value") == [1, 2], "a refused schema leaves no version"


def test_an_identical_schema_has_one_id_in_every_subject():
    r, _ = registry()
    a = r.register("a-value", V1)
    b = r.register("b-value", V1)
    assert a.id == b.id and (a.version, b.version) == (1, 1)
    assert r.id_versions(a.id) == [("a-value", 1), ("b-value", 1)]
    assert r.register("b-value", V2).id == 2


@pytest.mark.parametrize(("level", "new", "allowed"), [
    ("BACKWARD", V2, True), ("BACKWARD", V_STRING_ID, False),
    ("FORWARD", V3, True), ("FORWARD", V_STRING_ID, False),
    ("FULL", V2, True), ("FULL", V3, False),
    ("NONE", V_STRING_ID, True),
])
def test_each_level_decides_as_avro_resolution_does(level, new, allowed):
    r, _ = registry()
    r.register("s", V1)
    r.set_compatibility("s", level)
    assert (r.test_compatibility("s", new) == []) is allowed
    if allowed:
        assert r.register("s", new).version == 2
    else:
        assert error(r.register, "s", new).error_code == 409


def test_transitive_levels_check_every_version_and_the_others_only_the_latest():
    r, _ = registry()
    r.set_compatibility(None, "NONE")
    r.register("s", V1)            # id: long
    r.register("s", V_STRING_ID)   # id: string, allowed under NONE
    new = record(("id", "string"), ("note", "?string"))
    r.set_compatibility("s", "BACKWARD")
    assert r.test_compatibility("s", new) == [], "the latest version reads as a string"
    r.set_compatibility("s", "BACKWARD_TRANSITIVE")
    assert r.test_compatibility("s", new) != [], "version 1's longs cannot be read as strings"
    assert r.test_compatibility("s", new, version=2) == [], "one version named: that one only"


def test_deletes_are_soft_first_then_permanent_as_confluent_requires():
    r, _ = registry()
    r.register("s", V1)
    r.register("s", V2)
    assert error(r.delete_subject, "s", permanent=True).error_code == 40405
    assert r.delete_subject("s") == [1, 2]
    assert r.subjects() == [] and r.subjects(deleted=True) == ["s"]
    assert error(r.versions, "s").error_code == 40401
    assert r.version("s", 1, deleted=True).id == 1
    assert error(r.delete_subject, "s").error_code == 40404
    assert r.delete_subject("s", permanent=True) == [1, 2]
    assert r.subjects(deleted=True) == []
    assert error(r.by_id, 1).error_code == 40403


def test_a_soft_deleted_version_no_longer_counts_for_compatibility():
    r, _ = registry()
    r.register("s", V1)
    r.register("s", V2)
    assert r.delete_version("s", "latest") == 2
    assert r.versions("s") == [1] and r.version("s", "latest").version == 1
    assert error(r.delete_version, "s", 1, permanent=True).error_code == 40407


def test_bad_input_is_answered_with_confluent_codes():
    r, _ = registry()
    assert error(r.register, "s", '{"type": "nope"}').error_code == 42201
    assert error(r.register, "s", "not json").error_code == 42201
    r.register("s", V1)
    assert error(r.version, "s", "zero").error_code == 42202
    assert error(r.version, "s", 7).error_code == 40402
    assert error(r.set_compatibility, "s", "SIDEWAYS").error_code == 42203
    assert error(r.compatibility, "s").error_code == 40408
    assert r.compatibility("s", default_to_global=True).value == "BACKWARD"
    assert error(r.lookup, "s", V2).error_code == 40403
    assert error(r.set_mode, None, "SOMETIMES").error_code == 42204


def test_read_only_mode_refuses_registrations():
    r, _ = registry()
    r.set_mode("s", "READONLY")
    assert error(r.register, "s", V1).error_code == 42205
    r.delete_mode("s")
    assert r.register("s", V1).id == 1


def test_json_schema_and_protobuf_follow_their_own_rules():
    r, _ = registry()
    old = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    wider = json.dumps({"type": "object", "properties": {"id": {"type": "number"}}})
    other = json.dumps({"type": "object", "properties": {"id": {"type": "string"}}})
    assert r.register("j", old, "JSON").id == 1
    assert r.test_compatibility("j", wider, "JSON") == []
    assert error(r.register, "j", other, "JSON").error_code == 409
    assert error(r.register, "j2", json.dumps({"type": 12}), "JSON").error_code == 42201
    proto = 'syntax = "proto3";\nmessage Order {\n  int64 id = 1;\n}\n'
    added = 'syntax = "proto3";\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n'
    retyped = 'syntax = "proto3";\nmessage Order {\n  string id = 1;\n}\n'
    assert r.register("p", proto, "PROTOBUF").id == 2
    assert r.register("p", added, "PROTOBUF").version == 2
    assert error(r.register, "p", retyped, "PROTOBUF").error_code == 409
    assert r.by_id(2).schema_type == "PROTOBUF"


def test_the_topic_uses_confluents_keys_and_values():
    r, log = registry()
    r.register("orders-value", V1)
    r.set_compatibility(None, "FULL")
    key, value = (json.loads(x) for x in log.records[0])
    assert key == {"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}
    assert value["id"] == 1 and value["subject"] == "orders-value" and value["version"] == 1
    assert json.loads(value["schema"])["name"] == "order" and value["deleted"] is False
    assert json.loads(log.records[1][0]) == {"keytype": "CONFIG", "subject": None, "magic": 0}
    assert json.loads(log.records[1][1]) == {"compatibilityLevel": "FULL"}


OPERATIONS = st.lists(st.tuples(
    st.sampled_from(["register", "delete", "delete_permanent", "level", "delete_version"]),
    st.sampled_from(["a", "b"]),
    st.sampled_from([V1, V2, V3, V_STRING_ID]),
    st.sampled_from(["NONE", "BACKWARD", "FULL_TRANSITIVE"])), max_size=25)


def _snapshot(r: SchemaRegistry) -> object:
    subjects = r.subjects(deleted=True)
    return ([(s, v, r.version(s, v, deleted=True)) for s in subjects
             for v in r.versions(s, deleted=True)],
            [r.compatibility(s, default_to_global=True) for s in ("a", "b")])


@settings(max_examples=60, deadline=None)
@given(OPERATIONS)
def test_a_registry_reading_the_topic_afresh_holds_the_same_state(operations):
    """What a restarted worker (or another worker of the cluster) reads is what the writer
    had: the state is a function of the topic's records."""
    r, log = registry()
    for op, subject, schema, level in operations:
        try:
            if op == "register":
                r.register(subject, schema)
            elif op == "delete":
                r.delete_subject(subject)
            elif op == "delete_permanent":
                r.delete_subject(subject, permanent=True)
            elif op == "delete_version":
                r.delete_version(subject, "latest")
            else:
                r.set_compatibility(subject, level)
        except RegistryError:
            pass
        # invariants after every operation: ids are unique per schema, versions increase
        for s in r.subjects(deleted=True):
            versions = r.versions(s, deleted=True)
            assert versions == sorted(set(versions))
    fresh = SchemaRegistry()
    for key, value in log.records:
        fresh.apply(key, value)
    assert _snapshot(fresh) == _snapshot(r)
