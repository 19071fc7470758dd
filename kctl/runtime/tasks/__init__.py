"""The task loops, one concern per module: `base` (the thread and its states), `submitted`
(source records in flight), `contexts` (what a task sees of the worker), `source` and
`sink` (the loops). Exactly-once source positions are `kctl.runtime.source_positions`.

Each loop runs in its own thread; state changes go to a StatusListener. Every step that can
fail per record runs through the RetryWithToleranceOperator with its Kafka Connect stage.
"""

from kctl.runtime.tasks.base import StatusListener, Transforms, WorkerTask
from kctl.runtime.tasks.sink import WorkerSinkTask
from kctl.runtime.tasks.source import WorkerSourceTask
from kctl.runtime.tasks.submitted import SubmittedRecords

__all__ = ["StatusListener", "SubmittedRecords", "Transforms", "WorkerSinkTask",
           "WorkerSourceTask", "WorkerTask"]
