"""Retries, error tolerance and error reporting (KIP-298), for sink and source tasks.

Each step of a task loop runs through `RetryWithToleranceOperator.execute` with its Stage,
so one place decides: retry with backoff, fail the task, or skip the record and report it
to the log and the dead letter queue. kctl reports source failures to a DLQ too (KIP-779).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, TypeVar, cast

from kctl.api.records import ConnectRecord, SourceRecord
from kctl.backoff import Backoff
from kctl.errors import ConnectError, DataError, RetriableError
from kctl.runtime.connector_config import ERRORS_TOLERANCE_CONFIG
from kctl.transport.base import LogRecord, Producer, ProducerRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

HEADER_PREFIX = "__connect.errors."


class Stage(Enum):
    """Kafka Connect's stage names, as written in the DLQ headers."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


class Tolerance(Enum):
    NONE = "none"
    ALL = "all"


class _Failed:
    def __repr__(self) -> str:
        return "FAILED"


FAILED: Any = _Failed()
"""Returned by execute() when the record was skipped under tolerance `all`."""


@dataclass
class ErrorContext:
    """What is known about one failure, for the log and the DLQ headers."""

    stage: Stage
    executing_class: str
    error: BaseException
    connector: str
    task: int
    consumed: LogRecord | None = None
    source: SourceRecord | None = None
    attempts: int = 1


class ErrorReporter:
    def report(self, ctx: ErrorContext) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the reporter holds (the DLQ producer); the task calls it on stop."""


class LogReporter(ErrorReporter):
    def __init__(self, include_messages: bool):
        self.include_messages = include_messages
        self.logged = 0  # Kafka's total-errors-logged

    def report(self, ctx: ErrorContext) -> None:
        where = ""
        if ctx.consumed is not None:
            where = f" at {ctx.consumed.topic}-{ctx.consumed.partition}@{ctx.consumed.offset}"
        elif ctx.source is not None:
            where = f" at source {dict(ctx.source.source_partition)}@{dict(ctx.source.source_offset)}"
        msg = f"Error in {ctx.connector}-{ctx.task} stage {ctx.stage.value} ({ctx.executing_class}){where}: {ctx.error!r}"
        if self.include_messages and ctx.consumed is not None:
            msg += f" key={ctx.consumed.key!r} value={ctx.consumed.value!r}"
        log.error(msg)
        self.logged += 1


def _jsonable(v: Any) -> Any:
    if hasattr(v, "to_dict"):
        return v.to_dict()
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return v


def source_record_payload(record: ConnectRecord) -> tuple[bytes | None, bytes | None]:
    """Bytes for a record no converter could encode: plain JSON of key and value, repr when
    not JSON-able (a record reaches the DLQ in some form rather than not at all)."""

    def enc(v: Any) -> bytes | None:
        if v is None:
            return None
        try:
            return json.dumps(_jsonable(v), default=str).encode()
        except (TypeError, ValueError):
            return repr(v).encode()

    return enc(record.key), enc(record.value)


class SourcePositionTracker(Protocol):
    """What an exactly-once source task adds to its DLQ records, so that after a crash the
    records it dead-lettered count, like those it delivered, as done (see WorkerSourceTask)."""

    def dlq_headers(self, topic: str, ctx: ErrorContext) -> list[tuple[str, bytes]]: ...

    def dlq_written(self, metadata: Any) -> None: ...


class DeadLetterQueueReporter(ErrorReporter):
    """Sends the failed record, as it was, to the DLQ topic with the error as headers."""

    tracker: SourcePositionTracker | None = None

    def __init__(self, producer: Producer, topic: str, *, context_headers: bool,
                 encode_source: Callable[[SourceRecord], tuple[bytes | None, bytes | None]]
                 | None = None):
        self.producer = producer
        self.encode_source = encode_source
        self.topic = topic
        self.context_headers = context_headers
        self.failures: list[BaseException] = []
        self.closed = False
        self.produce_requests = 0  # Kafka's deadletterqueue-produce-requests
        self.produce_failures = 0
        # reports may come from the task thread and from a sink's own threads (KIP-610)
        self._lock = threading.Lock()

    def report(self, ctx: ErrorContext) -> None:
        with self._lock:
            self._report(ctx)

    def _report(self, ctx: ErrorContext) -> None:
        if self.closed:
            raise ConnectError(f"Could not write to dead letter queue {self.topic}: "
                               "the task has stopped")
        if ctx.consumed is not None:
            key, value = ctx.consumed.key, ctx.consumed.value
            headers = list(ctx.consumed.headers)
        elif ctx.source is not None:
            if ctx.stage is Stage.TASK_POLL and isinstance(ctx.source.value, str | bytes):
                # input the source could not parse: keep it exactly as it was read
                raw = ctx.source.value
                key, value = None, raw.encode() if isinstance(raw, str) else raw
            else:
                key, value = self._encode(ctx.source)
            headers = [(h.key, None if h.value is None else str(h.value).encode())
                       for h in ctx.source.headers]
        else:
            # a skipped record that cannot be written would be lost without a trace
            raise ConnectError(f"Could not write to dead letter queue {self.topic}: the "
                               f"{ctx.stage.value} failure carries no record")
        if self.context_headers:
            headers.extend(error_headers(ctx))
        if self.tracker is not None and ctx.consumed is None and ctx.source is not None:
            headers.extend(self.tracker.dlq_headers(self.topic, ctx))
        self.produce_requests += 1
        try:
            self.producer.send(ProducerRecord(self.topic, value, key, headers=tuple(headers)),
                               self._on_delivery)
        except Exception as e:  # refused outright, e.g. larger than message.max.bytes
            self.produce_failures += 1
            raise ConnectError(f"Could not write to dead letter queue {self.topic}: {e}") from e
        # The offset may advance only past dead-lettered records: wait for the DLQ ack.
        remaining = self.producer.flush(30)
        if remaining or self.failures:
            self.produce_failures += 1
            err = self.failures.pop() if self.failures else TimeoutError("DLQ produce timed out")
            raise ConnectError(f"Could not write to dead letter queue {self.topic}: {err}") from err

    def _encode(self, record: SourceRecord) -> tuple[bytes | None, bytes | None]:
        """With the task's converters when they work (so replay can decode), else plain JSON."""
        if self.encode_source is not None:
            try:
                return self.encode_source(record)
            except Exception:
                pass
        return source_record_payload(record)

    def _on_delivery(self, md: Any, err: BaseException | None) -> None:
        if err is not None:
            self.failures.append(err)
        elif self.tracker is not None and md is not None:
            self.tracker.dlq_written(md)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self.producer.close()  # flushes first


def error_headers(ctx: ErrorContext) -> list[tuple[str, bytes | None]]:
    h: list[tuple[str, bytes | None]] = []

    def add(name: str, value: Any) -> None:
        h.append((HEADER_PREFIX + name, None if value is None else str(value).encode()))

    if ctx.consumed is not None:
        add("topic", ctx.consumed.topic)
        add("partition", ctx.consumed.partition)
        add("offset", ctx.consumed.offset)
    elif ctx.source is not None:
        add("topic", ctx.source.topic)
        add("partition", ctx.source.kafka_partition)
        add("source.partition", json.dumps(dict(ctx.source.source_partition), default=str))
        add("source.offset", json.dumps(dict(ctx.source.source_offset), default=str))
    add("connector.name", ctx.connector)
    add("task.id", ctx.task)
    add("stage", ctx.stage.value)
    add("class.name", ctx.executing_class)
    err = ctx.error
    add("exception.class.name", f"{type(err).__module__}.{type(err).__qualname__}")
    add("exception.message", str(err))
    add("exception.stacktrace", "".join(traceback.format_exception(err)))
    return h


# What a failure in each stage was doing, for the messages of failures no tolerance covers.
FAILED_WHILE = {
    Stage.TASK_POLL: "reading from the source (poll)",
    Stage.TASK_PUT: "writing to the sink (put)",
    Stage.KAFKA_PRODUCE: "producing to the log",
    Stage.KAFKA_CONSUME: "consuming from the log",
    Stage.KEY_CONVERTER: "converting a key",
    Stage.VALUE_CONVERTER: "converting a value",
    Stage.HEADER_CONVERTER: "converting headers",
    Stage.TRANSFORMATION: "transforming a record",
}


@dataclass(frozen=True)
class ErrorCounters:
    """Kafka's task-error-metrics for one task at one moment (`RetryWithToleranceOperator.
    counters()`): what `/metrics` reports."""

    errors: int = 0  # records that failed for good (total-record-errors)
    failures: int = 0  # failed attempts, retries included (total-record-failures)
    retries: int = 0
    skipped: int = 0
    last_error_ms: int = 0
    logged: int = 0  # errors written to the log (total-errors-logged)
    dlq_requests: int = 0
    dlq_failures: int = 0


class RetryWithToleranceOperator:
    """Runs one step: retries retriable errors with capped exponential backoff and jitter
    until `retry_timeout_ms`, then fails the task (tolerance none) or reports and skips."""

    def __init__(
        self,
        *,
        connector: str,
        task: int,
        retry_timeout_ms: int = 0,
        retry_delay_max_ms: int = 60000,
        tolerance: Tolerance = Tolerance.NONE,
        reporters: list[ErrorReporter] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        should_stop: Callable[[], bool] = lambda: False,
    ):
        self.connector = connector
        self.task = task
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_delay_max_ms = retry_delay_max_ms
        self.tolerance = tolerance
        self.reporters = reporters or []
        self.clock = clock
        self.sleep = sleep
        self.should_stop = should_stop
        # Kafka's task-error-metrics, bumped only when something fails (never per record):
        self.total_failures = 0  # records that failed for good (total-record-errors)
        self.attempt_failures = 0  # failed attempts, retries included (total-record-failures)
        self.total_retries = 0
        self.total_skipped = 0
        self.last_error_ms = 0  # wall clock, as Kafka's last-error-timestamp

    def counters(self) -> ErrorCounters:
        """The error counters now, with the log and dead letter queue reporters' totals."""
        logs = [r for r in self.reporters if isinstance(r, LogReporter)]
        dlqs = [r for r in self.reporters if isinstance(r, DeadLetterQueueReporter)]
        return ErrorCounters(
            errors=self.total_failures, failures=self.attempt_failures,
            retries=self.total_retries, skipped=self.total_skipped,
            last_error_ms=self.last_error_ms, logged=sum(r.logged for r in logs),
            dlq_requests=sum(r.produce_requests for r in dlqs),
            dlq_failures=sum(r.produce_failures for r in dlqs))

    def backoff_ms(self, attempt: int) -> float:
        base = Backoff(first=300, cap=self.retry_delay_max_ms).delay(attempt)
        return base * (0.8 + 0.4 * random.random())

    def execute(
        self,
        fn: Callable[[], T],
        stage: Stage,
        executing_class: str | Callable[[], str],
        *,
        consumed: LogRecord | None = None,
        source: SourceRecord | None = None,
        tolerate: bool = True,
    ) -> T:
        """`tolerate=False`: retriable errors are retried, every other failure is fatal."""
        forever = self.retry_timeout_ms < 0
        deadline = self.clock() + self.retry_timeout_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except Exception as e:
                self.attempt_failures += 1
                retriable = isinstance(e, RetriableError)
                if retriable and not self.should_stop():
                    remaining_ms = float("inf") if forever else (deadline - self.clock()) * 1000
                    if remaining_ms > 0:
                        self.total_retries += 1
                        self.sleep(min(self.backoff_ms(attempt), remaining_ms) / 1000)
                        continue
                # FAILED, the skipped record's marker, stands in for fn's result
                return cast(T, self._fail(e, stage, executing_class, consumed, source,
                                          attempt, tolerate))

    def _fail(self, e: Exception, stage: Stage, executing_class: str | Callable[[], str],
              consumed: LogRecord | None, source: SourceRecord | None, attempts: int,
              tolerate: bool = True) -> Any:
        self.total_failures += 1
        self.last_error_ms = int(time.time() * 1000)
        if callable(executing_class):  # e.g. the transform of a chain that actually failed
            executing_class = executing_class()
        if not tolerate and not (self.tolerance is Tolerance.NONE
                                 and isinstance(e, DataError)):
            # a step no tolerance covers (a failing poll, e.g. the database went away): say
            # what failed, whatever errors.tolerance says (it was never a matter of
            # tolerance). Bad input a poll reports (DataError) under tolerance none is what
            # tolerance is about: Kafka's wording below.
            raise ConnectError(
                f"Failed {FAILED_WHILE.get(stage, 'in ' + stage.value)} (stage {stage.value}, "
                f"class {executing_class}): {type(e).__name__}: {e}") from e
        if self.tolerance is Tolerance.NONE:
            raise ConnectError(
                f"Tolerance exceeded in error handler (stage {stage.value}, "
                f"class {executing_class}): {type(e).__name__}: {e}") from e
        ctx = ErrorContext(stage, executing_class, e, self.connector, self.task,
                           consumed, source, attempts)
        for r in self.reporters:
            r.report(ctx)
        self.total_skipped += 1
        return FAILED

    def close(self) -> None:
        """Close every reporter (each DLQ reporter owns a producer); never raises."""
        for r in self.reporters:
            try:
                r.close()
            except Exception as e:
                log.warning("Closing error reporter %s of %s-%s failed: %s",
                            type(r).__name__, self.connector, self.task, e)


def operator_from_config(cfg: Mapping[str, Any], *, connector: str, task: int,
                         reporters: list[ErrorReporter],
                         should_stop: Callable[[], bool],
                         sleep: Callable[[float], Any] = time.sleep) -> RetryWithToleranceOperator:
    """`sleep` should wake when the task is asked to stop, so a backoff never delays a stop."""
    return RetryWithToleranceOperator(
        connector=connector, task=task,
        retry_timeout_ms=int(cfg["errors.retry.timeout"]),
        retry_delay_max_ms=int(cfg["errors.retry.delay.max.ms"]),
        tolerance=Tolerance(str(cfg[ERRORS_TOLERANCE_CONFIG]).lower()),
        reporters=reporters, should_stop=should_stop, sleep=sleep,
    )
