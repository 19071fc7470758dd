"""What a distributed herder asks of the other workers of its cluster, over the internal
REST requests `kctl.rest.internal` carries: task configs to the leader, and a logger level
to every worker (KIP-976's `scope=cluster`, which the leader hands to each member)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kctl.storage.configs import SessionKey


class TaskConfigSender(Protocol):
    """Hands task configs a follower generated to the leader at `leader_url` (Kafka's
    internal `POST /connectors/{name}/tasks`), signed with `key` when one is given;
    raises when the leader does not take them. `kctl.rest.internal` carries it over HTTP."""

    def __call__(self, leader_url: str, connector: str, configs: list[dict[str, str]],
                 key: SessionKey | None) -> None: ...


class LoggerLevelSender(Protocol):
    """Sets logger `name` to `level` on the worker at `url` (its own `PUT
    /admin/loggers/{name}`, scope worker); raises when that worker does not take it."""

    def __call__(self, url: str, name: str, level: str) -> None: ...
