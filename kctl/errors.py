"""One exception root for kctl.

Core code raises these; only the edges (REST, CLI) turn them into HTTP status
codes or exit codes, so the mapping lives there and nowhere else.
"""

from __future__ import annotations


class KctlError(Exception):
    """Root of every error kctl raises on purpose."""


class ConfigError(KctlError):
    """A configuration value is missing, unknown or invalid.

    `key` names the offending key and `source` the file or connector it came from,
    so the message can say exactly where to look.
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        super().__init__(message)
        self.key = key
        self.source = source


class ValidationError(ConfigError):
    """A connector config failed ConfigDef validation; `errors` maps field -> messages."""

    def __init__(self, message: str, errors: dict[str, list[str]]):
        super().__init__(message)
        self.errors = errors


class NotFoundError(KctlError):
    """A connector, task, plugin or topic that does not exist."""


class AlreadyExistsError(KctlError):
    """Creating something that already exists."""


class ConflictError(KctlError):
    """The request cannot be served in the current state (e.g. a rebalance is running)."""


class ForbiddenError(KctlError):
    """An internal request between workers without a valid signature (KIP-507)."""


class RequestTargetError(KctlError):
    """Another worker must serve this request (the group's leader, or the worker that runs
    the task); the REST layer forwards it to `forward_url`, as Kafka Connect does."""

    def __init__(self, message: str, forward_url: str):
        super().__init__(message)
        self.forward_url = forward_url


class ConnectError(KctlError):
    """A connector or task failed; the runtime records it as FAILED with this trace."""


class RetriableError(ConnectError):
    """A failure that may succeed when retried (Kafka Connect's RetriableException)."""


class DataError(ConnectError):
    """A record or value does not fit its schema or format."""


class TransportError(KctlError):
    """The log or broker rejected or lost an operation."""


class CommitFailedError(TransportError):
    """The group coordinator refused an offset commit because this member no longer holds
    its partitions in the current generation (a rebalance moved them, or the member was
    evicted): the next owner starts from the last offsets committed before."""


class ProtocolError(KctlError):
    """The group protocol received an event that its current state does not allow."""


class PluginError(KctlError):
    """A connector, transform or assignor plugin cannot be found or loaded."""
