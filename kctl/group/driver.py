"""What an application needs of the thing that carries its `GroupMember` to a coordinator.

A driver owns the I/O half of group membership: it sends the member's requests, feeds the
answers and the time back, and hands the application the member's actions. The
distributed herder is written against this protocol only, so the same herder runs on a
Kafka group coordinator (`transport/kafka_group.py`'s BrokerGroupDriver) and on the
in-process coordinator of `tests/support/in_process_group.py`, with no broker.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from kctl.group.history import GenerationCompleted
from kctl.group.protocol import MemberFailed, StartWork, StopWork

__all__ = ["GroupDriver", "MemberAction"]

A_co = TypeVar("A_co", covariant=True)  # the assignment the leader sends
W = TypeVar("W")  # the work a member starts and stops

# What `poll` and `leave` hand the application, in order.
MemberAction = StartWork[W] | StopWork[W] | MemberFailed | GenerationCompleted


class GroupDriver(Protocol, Generic[A_co, W]):
    """One member's connection to its group; driven by one thread (the herder's tick)."""

    def start(self) -> None:
        """Join the group (raise a KctlError when the coordinator cannot be reached)."""

    def poll(self, timeout: float) -> list[MemberAction[W]]:
        """Run the member for up to `timeout` seconds, less when something happens; the
        application stops and starts what the actions say before it polls again."""

    def leave(self, reason: str = ...) -> list[MemberAction[W]]:
        """Leave at once (no session timeout to wait for); returns the work to stop."""

    def request_rejoin(self, reason: str) -> None:
        """Start a rebalance (the leader's answer to a config change)."""

    def wakeup(self) -> None:
        """End a `poll` early; safe from any thread."""

    def close(self) -> None: ...

    @property
    def assignment(self) -> A_co | None:
        """The last assignment the leader sent this member (None before the first)."""
