"""The JSON the REST API takes and gives, as Pydantic models: Kafka Connect's shapes, and
kctl's extensions (the dead letter queue, rebalances, groups).

FastAPI validates requests with them (a body that does not fit is answered 400, as Kafka
Connect answers it), checks every answer against them, and writes the OpenAPI document
from them. The herder's values keep their own `to_json`; an answer that drifted from the
model here would fail FastAPI's check instead of reaching a client.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from kctl.runtime.loggers import LEVELS

__all__ = [
    "ActiveTopics", "ConfigInfo", "ConfigInfos", "ConfigKeyInfo", "ConfigMap", "ConfigValueInfo",
    "ConnectorInfo", "ConnectorOffset", "ConnectorOffsets", "ConnectorState",
    "ConnectorStatus", "ConnectorTaskId", "CreateConnector", "DlqPurged", "DlqRecord",
    "DlqRecords", "Error", "ExpandedConnector", "GenerationReplay", "GroupDescription",
    "Groups", "Health", "LoggerLevel", "LoggerLevelChange", "Message", "PluginInfo",
    "RebalanceHistory", "ReplayReport", "ServerInfo", "TaskInfo", "TaskState",
]

ConnectorType = Literal["source", "sink", "unknown"]
StateName = Literal["UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING",
                    "DESTROYED"]


class _Model(BaseModel):
    """An answer's shape, exact: a key the model does not name fails FastAPI's check."""

    model_config = ConfigDict(extra="forbid")


class Error(_Model):
    """Every error answer (kctl's and Kafka Connect's shape)."""

    error_code: int = Field(description="The HTTP status code")
    message: str
    errors: dict[str, list[str]] = Field(default_factory=dict,
                                         description="Invalid config: key -> messages")


# Config values are strings in Kafka Connect; YAML users send numbers, booleans and lists
# too (made strings), and null (ignored; PATCH: removes the key).
ConfigScalar = str | int | float | bool
ConfigMap = dict[str, ConfigScalar | list[ConfigScalar] | None]


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class CreateConnector(BaseModel):
    """POST /connectors."""

    name: str = Field(min_length=1, pattern=r"^[^/]+$")
    config: ConfigMap
    # Kafka Connect reads the state whatever its case
    initial_state: Annotated[Literal["RUNNING", "PAUSED", "STOPPED"] | None,
                             BeforeValidator(_upper)] = None


class ConnectorTaskId(_Model):
    connector: str
    task: int


class ConnectorInfo(_Model):
    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: ConnectorType


class ConnectorState(_Model):
    state: StateName
    worker_id: str
    trace: str | None = None


class TaskState(_Model):
    id: int
    state: StateName
    worker_id: str
    trace: str | None = None


class ConnectorStatus(_Model):
    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: ConnectorType


class ExpandedConnector(_Model):
    """GET /connectors?expand=status&expand=info: what each was asked for."""

    status: ConnectorStatus | None = None
    info: ConnectorInfo | None = None


class TaskInfo(_Model):
    id: ConnectorTaskId
    config: dict[str, str]


class ConnectorOffset(BaseModel):
    partition: dict[str, Any]
    offset: dict[str, Any] | None = None


class ConnectorOffsets(BaseModel):
    """GET and PATCH /connectors/{name}/offsets."""

    offsets: list[ConnectorOffset]


class Message(_Model):
    message: str


class ActiveTopics(_Model):
    topics: list[str]


class PluginInfo(_Model):
    class_: str = Field(alias="class")
    type: str
    version: str


class ConfigKeyInfo(_Model):
    """A key's definition (Kafka's ConfigKeyInfo)."""

    name: str
    type: str
    required: bool
    default_value: str | None
    importance: str
    documentation: str | None
    group: str | None
    width: str
    display_name: str
    dependents: list[str]
    order: int


class UndefinedKey(_Model):
    """A key of the config that no definition names."""

    name: str


class ConfigValueInfo(_Model):
    name: str
    value: str | None
    recommended_values: list[str]
    errors: list[str]
    visible: bool


class ConfigInfo(_Model):
    definition: ConfigKeyInfo | UndefinedKey
    value: ConfigValueInfo


class ConfigWarning(_Model):
    name: str
    message: str


class ConfigInfos(_Model):
    """PUT /connector-plugins/{plugin}/config/validate (Kafka's ConfigInfos, and kctl's
    `warnings` for keys nothing reads, which Kafka's clients skip)."""

    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo]
    warnings: list[ConfigWarning]


class LoggerLevel(_Model):
    level: str
    last_modified: int | None = Field(description="Epoch ms of the last change here, if any")


class LoggerLevelChange(BaseModel):
    """PUT /admin/loggers/{logger}. The level is checked, whatever its case, where levels
    are known (kctl.runtime.loggers), which also names a missing one."""

    model_config = ConfigDict(json_schema_extra={"required": ["level"]})

    level: Annotated[str | None, WithJsonSchema({"type": "string", "enum": list(LEVELS)})] = None


class ServerInfo(_Model):
    version: str
    commit: str
    kafka_cluster_id: str


class Health(BaseModel):
    """GET /health; what a worker adds to say why is passed through."""

    model_config = ConfigDict(extra="allow")

    status: Literal["healthy", "degraded", "unhealthy"]
    message: str
    problems: list[str] | None = None


class DlqRecord(_Model):
    """A dead-lettered record with the context Kafka Connect's headers give."""

    dlq_offset: int
    dlq_partition: int
    time: str
    stage: str | None
    exception: str | None
    message: str | None
    topic: str | None
    partition: str | None
    offset: str | None
    source_partition: str | None
    source_offset: str | None
    key: str | None
    value: str | None
    key_payload: str | None
    value_payload: str | None
    headers: dict[str, str | None]


class DlqRecords(_Model):
    records: list[DlqRecord]


class Count(_Model):
    count: int


class SkipReason(Count):
    reason: str


class ReplayError(Count):
    error: str


class ReplayReport(_Model):
    replayed: int
    skipped: int
    failed: int
    total: int
    skipped_reasons: list[SkipReason]
    errors: list[ReplayError]


class DlqPurged(_Model):
    purged: int


class Groups(_Model):
    worker_group: str
    groups: list[str]


class _Document(BaseModel):
    """A kctl document whose fields grow with kctl: the ones named here are checked, any
    other is passed through."""

    model_config = ConfigDict(extra="allow")


class RebalanceHistory(_Document):
    """GET /rebalances: the document `kctl rebalance explain -o json` writes, one round per
    generation (each round as `kctl.rebalance.history` builds it)."""

    kind: str
    protocol: str
    source: str
    rounds: list[dict[str, Any]]
    final: dict[str, Any] = Field(description="Each worker's work after the last round")
    summary: dict[str, Any]


class ReplayDifference(_Document):
    member: str
    field: str


class GenerationReplay(_Document):
    """GET /rebalances/{generation}/replay: the leader's recorded inputs run again."""

    generation: int
    protocol: str
    leader: str
    members: list[str]
    reproduced: bool
    differences: list[ReplayDifference]


class GroupDescription(_Document):
    """GET /groups/{group}: the worker group (kind `workers`, from the broker and the
    workers' records) or a sink connector's consumer group (kind `sink`); `sources` names
    where each field came from."""

    group: str
    kind: Literal["workers", "sink"]
    state: str
    members: list[dict[str, Any]]
    sources: dict[str, str]
