"""The Herder: the one interface REST (and the CLI through REST) uses to manage connectors.

AbstractHerder implements what every herder shares; StandaloneHerder adds the writes for
one worker; DistributedHerder adds them for a worker of a group, forwarding writes to the
group's leader. REST reaches nothing else: not the stores, not the transport.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl.states import ConnectorInfo, ConnectorStatus, PluginInfo, TargetState, TaskStatus
from kctl.storage.configs import SessionKey

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kctl.runtime.dlq import ReplayReport
    from kctl.runtime.groups import Groups
    from kctl.runtime.loggers import Loggers
    from kctl.runtime.registry import SchemaRegistry
    from kctl.runtime.topics import ReadRequest

__all__ = ["Herder", "SessionKey"]


@dataclass(frozen=True)
class Health:
    """What `/health` answers (Kafka Connect's KIP-1017 statuses, and `degraded`): a worker
    that runs but whose tasks cannot move records is up, and says which and why."""

    status: str  # "healthy" | "degraded" | "unhealthy"
    message: str
    problems: tuple[str, ...] = ()

    @property
    def up(self) -> bool:
        """Whether the worker serves (healthy or degraded)."""
        return self.status != "unhealthy"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "message": self.message}
        if self.problems:
            out["problems"] = list(self.problems)
        return out


READY = "Worker has completed startup and is ready to handle requests."


class Herder(ABC):
    worker_id: str
    loggers: Loggers  # this worker's /admin/loggers
    # the worker's Schema Registry (schema.registry.enable), which REST serves; None when off
    schema_registry: SchemaRegistry | None = None

    @abstractmethod
    def connectors(self) -> list[str]: ...

    @abstractmethod
    def connector_info(self, name: str) -> ConnectorInfo:
        """NotFoundError when there is no such connector."""

    @abstractmethod
    def connector_config(self, name: str) -> dict[str, str]: ...

    @abstractmethod
    def create_connector(self, name: str, config: Mapping[str, Any],
                         initial_state: TargetState = TargetState.STARTED) -> ConnectorInfo:
        """ValidationError on a bad config; AlreadyExistsError when the name is taken."""

    @abstractmethod
    def put_connector_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, ConnectorInfo]:
        """Create or replace; returns (created, info)."""

    @abstractmethod
    def patch_connector_config(self, name: str, patch: Mapping[str, Any | None]) -> ConnectorInfo:
        """Merge `patch` into the config; a None value removes the key."""

    @abstractmethod
    def connector_status(self, name: str) -> ConnectorStatus: ...

    @abstractmethod
    def task_configs(self, name: str) -> list[dict[str, str]]: ...

    @abstractmethod
    def task_status(self, name: str, task: int) -> TaskStatus: ...

    @abstractmethod
    def restart_connector(self, name: str, *, include_tasks: bool = False,
                          only_failed: bool = False) -> ConnectorStatus:
        """Restart what the flags select; returns the plan: the status before the restart with
        RESTARTING for each connector and task restarted. REST answers 204 for a plain restart
        (neither flag) and 202 with the plan when includeTasks or onlyFailed is set, as Kafka
        Connect does."""

    @abstractmethod
    def restart_task(self, name: str, task: int) -> None: ...

    @abstractmethod
    def pause_connector(self, name: str) -> None: ...

    @abstractmethod
    def resume_connector(self, name: str) -> None: ...

    @abstractmethod
    def stop_connector(self, name: str) -> None: ...

    @abstractmethod
    def delete_connector(self, name: str) -> None: ...

    @abstractmethod
    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        """Kafka Connect's shape: [{"partition": {...}, "offset": {...}}, ...]."""

    @abstractmethod
    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """Only when the connector is STOPPED (ConflictError otherwise, which REST answers
        with 400 like Kafka Connect's BadRequest); returns a message."""

    @abstractmethod
    def reset_connector_offsets(self, name: str) -> str: ...

    @abstractmethod
    def connector_topics(self, name: str) -> list[str]: ...

    @abstractmethod
    def reset_connector_topics(self, name: str) -> None: ...

    @abstractmethod
    def plugins(self, connectors_only: bool = True) -> list[PluginInfo]:
        """Connector plugins; with connectors_only=False also transformations, predicates,
        converters and header converters (Kafka Connect 3.x's types)."""

    @abstractmethod
    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """ConfigKeyInfo list as Kafka Connect's GET /connector-plugins/{p}/config, for any
        plugin type; NotFoundError for an unknown plugin."""

    @abstractmethod
    def validate_connector_config(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """ConfigInfos as Kafka Connect's PUT /connector-plugins/{p}/config/validate;
        ConfigError (400) when the config's connector.class names another plugin."""

    @abstractmethod
    def worker_info(self) -> dict[str, Any]:
        """GET / : version, commit, kafka_cluster_id."""

    @abstractmethod
    def set_cluster_logger_level(self, name: str, level: str) -> list[str]:
        """KIP-976's `scope=cluster`: set logger `name` (and the loggers below it) to
        `level` on every worker of the cluster; the names set here."""

    @abstractmethod
    def health(self) -> Health:
        """Startup, the group (distributed), the Kafka connection, tasks that are stalled."""

    def healthy(self) -> tuple[bool, str]:
        """(up, message) of `health()`."""
        h = self.health()
        return h.up, h.message

    # -- between the workers of a cluster

    @abstractmethod
    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Task configs another worker generated (only a distributed group's leader takes
        them; REST has checked the request's signature)."""

    @property
    @abstractmethod
    def signs_internal_requests(self) -> bool:
        """Whether requests between workers carry a signature (`sessioned`, KIP-507)."""

    @abstractmethod
    def session_key(self) -> SessionKey | None:
        """The key internal requests are signed with (None: none yet, or none needed)."""

    # -- the dead letter queue (kctl's extension; sources have one too)

    @abstractmethod
    def dlq_records(self, name: str, limit: int = 1000) -> list[dict[str, Any]]:
        """The connector's DLQ records since the last purge, oldest first; NotFoundError
        when it has no DLQ."""

    @abstractmethod
    def dlq_replay(self, name: str, to_topic: str | None = None) -> ReplayReport:
        """Re-send them (to their original topic, or `to_topic`), counting what was sent,
        skipped and why, and what failed."""

    @abstractmethod
    def dlq_purge(self, name: str) -> int:
        """Hide every record the DLQ holds now from later reads and replays."""

    # -- the cluster's rebalances and groups (kctl's extension)

    @abstractmethod
    def rebalance_history(self, *, last: int | None = None, connector: str | None = None,
                          since_ms: int | None = None,
                          generation: int | None = None) -> dict[str, Any]:
        """Every worker's generation records merged, one round per generation, filtered as
        asked: the document `kctl rebalance explain -o json` writes."""

    @abstractmethod
    def replay_generation(self, generation: int) -> dict[str, Any]:
        """The leader's recorded assignor inputs of `generation` run again, and whether the
        answer is the one recorded."""

    @abstractmethod
    def groups(self) -> Groups:
        """The worker group and the sink connectors' consumer groups."""

    @abstractmethod
    def describe_group(self, group: str) -> dict[str, Any]:
        """One of `groups()` described, each field's source named; NotFoundError for any
        other group."""

    # -- what the worker counts

    @abstractmethod
    def metrics(self) -> CollectorRegistry:
        """The worker's metrics in Kafka Connect's names, for Prometheus."""

    # -- a look inside any topic (kctl's extension: `kctl topic`); reads only

    @abstractmethod
    def list_topics(self) -> list[dict[str, Any]]:
        """Every topic of the worker's log: name and partitions."""

    @abstractmethod
    def describe_topic(self, topic: str, connector: str | None = None,
                       value_converter: str | None = None) -> dict[str, Any]:
        """Partitions with start and end offsets, and the value schemas seen (decoded as
        `read_topic` decodes); NotFoundError for an unknown topic."""

    @abstractmethod
    def read_topic(self, topic: str, request: ReadRequest, connector: str | None = None,
                   key_converter: str | None = None,
                   value_converter: str | None = None) -> dict[str, Any]:
        """A bounded page of records, decoded by the converters of `connector`, else those
        named, else the worker's; `next` says where the following page starts."""
