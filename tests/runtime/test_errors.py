"""Retry with backoff, then fail or skip-and-report, as KIP-298 describes."""

import pytest
from support.clock import FakeClock

from kctl.errors import ConnectError, DataError, RetriableError, TransportError
from kctl.runtime.dlq import read_topic
from kctl.runtime.error_handling import (
    FAILED,
    DeadLetterQueueReporter,
    ErrorContext,
    ErrorReporter,
    RetryWithToleranceOperator,
    Stage,
    Tolerance,
    error_headers,
)
from kctl.transport.base import LogRecord, ProducerRecord
from kctl.transport.embedded import EmbeddedTransport


class Collect(ErrorReporter):
    def __init__(self):
        self.seen: list[ErrorContext] = []

    def report(self, ctx):
        self.seen.append(ctx)


def flaky(n_failures, exc=RetriableError):
    calls = {"n": 0}

    def fn():
        calls["n"] += 1
        if calls["n"] <= n_failures:
            raise exc("not yet")
        return "ok"

    return fn, calls


def op(tolerance, timeout_ms, clock, reporters=()):
    return RetryWithToleranceOperator(connector="c", task=0, retry_timeout_ms=timeout_ms,
                                      retry_delay_max_ms=1000, tolerance=tolerance,
                                      reporters=list(reporters), clock=clock.time,
                                      sleep=clock.sleep)


def test_retriable_failures_are_retried_with_growing_backoff_until_success():
    clock = FakeClock()
    fn, calls = flaky(3)
    assert op(Tolerance.NONE, 60_000, clock).execute(fn, Stage.TASK_PUT, "X") == "ok"
    assert calls["n"] == 4
    assert 0.3 * 0.8 + 0.6 * 0.8 + 1.0 * 0.8 <= clock.now <= 0.3 * 1.2 + 0.6 * 1.2 + 1.0 * 1.2


def test_retries_stop_at_the_timeout_then_tolerance_none_fails():
    clock = FakeClock()
    fn, _ = flaky(100)
    with pytest.raises(ConnectError, match=r"Tolerance exceeded.*TASK_PUT"):
        op(Tolerance.NONE, 2_000, clock).execute(fn, Stage.TASK_PUT, "X")
    assert clock.now == pytest.approx(2.0)


def test_non_retriable_errors_are_not_retried_and_all_skips_and_reports():
    clock = FakeClock()
    rep = Collect()
    fn, calls = flaky(1, ValueError)
    rec = LogRecord("t", 0, 7, 0, b"k", b"v")
    assert op(Tolerance.ALL, 60_000, clock, [rep]).execute(
        fn, Stage.VALUE_CONVERTER, "Conv", consumed=rec) is FAILED
    assert calls["n"] == 1 and clock.now == 0
    assert rep.seen[0].stage is Stage.VALUE_CONVERTER and rep.seen[0].consumed is rec


def test_error_headers_name_the_record_stage_and_exception():
    try:
        raise ValueError("bad json")
    except ValueError as e:
        err = e
    h = dict(error_headers(ErrorContext(Stage.VALUE_CONVERTER, "JsonConverter", err, "c", 3,
                                        consumed=LogRecord("t", 1, 42, 0, None, b"x"))))
    assert h["__connect.errors.topic"] == b"t"
    assert h["__connect.errors.partition"] == b"1"
    assert h["__connect.errors.offset"] == b"42"
    assert h["__connect.errors.connector.name"] == b"c"
    assert h["__connect.errors.task.id"] == b"3"
    assert h["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert h["__connect.errors.class.name"] == b"JsonConverter"
    assert h["__connect.errors.exception.class.name"] == b"builtins.ValueError"
    assert h["__connect.errors.exception.message"] == b"bad json"
    assert b"ValueError: bad json" in h["__connect.errors.exception.stacktrace"]


@pytest.fixture
def log(tmp_path):
    with EmbeddedTransport(tmp_path / "log") as t:
        yield t


def failure(stage=Stage.TASK_PUT, **where):
    return ErrorContext(stage, "Sink", ValueError("bad"), "c", 0, **where)


def test_a_failure_that_carries_no_record_is_an_error_not_a_silent_skip(log):
    dlq = DeadLetterQueueReporter(log.producer(), "dlq", context_headers=True)
    with pytest.raises(ConnectError, match=r"dead letter queue dlq: the TASK_PUT failure carries no record"):
        dlq.report(failure())
    dlq.report(failure(consumed=LogRecord("t", 0, 3, 0, b"k", b"v")))
    [written] = read_topic(log, "dlq")
    assert (written.key, written.value) == (b"k", b"v")


def test_closing_the_operator_closes_each_reporters_producer_and_nothing_is_written_after(log):
    producer = log.producer()
    dlq = DeadLetterQueueReporter(producer, "dlq", context_headers=False)

    class Broken(ErrorReporter):
        def report(self, ctx):
            pass

        def close(self):
            raise RuntimeError("cannot close")

    op = RetryWithToleranceOperator(connector="c", task=0, tolerance=Tolerance.ALL,
                                    reporters=[Broken(), dlq])
    op.close()  # one reporter failing to close does not keep the others open
    op.close()  # and closing twice is harmless
    with pytest.raises(TransportError, match="closed"):
        producer.send(ProducerRecord("dlq", b"x"))
    with pytest.raises(ConnectError, match="the task has stopped"):
        op.execute(lambda: 1 / 0, Stage.TRANSFORMATION, "T",
                   consumed=LogRecord("t", 0, 0, 0, None, b"v"))
    assert read_topic(log, "dlq") == []



def test_a_failure_no_tolerance_covers_says_what_failed_not_tolerance_exceeded():
    """A failing poll() is never skipped, even under errors.tolerance=all: its message names
    what failed, since tolerance was not the reason."""
    clock = FakeClock()
    fn, _ = flaky(1, PermissionError)
    with pytest.raises(ConnectError) as e:
        op(Tolerance.ALL, 0, clock, [Collect()]).execute(fn, Stage.TASK_POLL, "FileSourceTask",
                                                         tolerate=False)
    message = str(e.value)
    assert message.startswith("Failed reading from the source (poll) (stage TASK_POLL, "
                              "class FileSourceTask): PermissionError"), message
    assert "Tolerance exceeded" not in message
    # where tolerance was the reason, Kafka Connect's wording stays
    fn, _ = flaky(1, ValueError)
    with pytest.raises(ConnectError, match=r"^Tolerance exceeded in error handler"):
        op(Tolerance.NONE, 0, clock).execute(fn, Stage.TRANSFORMATION, "X")


def test_a_failing_poll_without_any_tolerance_set_says_what_failed():
    """errors.tolerance=none (the default) and a poll that fails (a database outage): the
    message names the failure, not "Tolerance exceeded" (no tolerance was ever asked for)."""
    clock = FakeClock()
    fn, _ = flaky(1, ConnectionRefusedError)
    with pytest.raises(ConnectError) as e:
        op(Tolerance.NONE, 0, clock).execute(fn, Stage.TASK_POLL, "JdbcSourceTask",
                                             tolerate=False)
    message = str(e.value)
    assert message.startswith("Failed reading from the source (poll) (stage TASK_POLL, "
                              "class JdbcSourceTask): ConnectionRefusedError"), message
    assert "Tolerance exceeded" not in message
    # bad input the poll reported (a malformed line) under tolerance none: that one is a
    # matter of tolerance, in Kafka Connect's words
    fn, _ = flaky(1, DataError)
    with pytest.raises(ConnectError, match=r"^Tolerance exceeded in error handler \(stage "
                                           r"TASK_POLL"):
        op(Tolerance.NONE, 0, clock).execute(fn, Stage.TASK_POLL, "FileSourceTask",
                                             tolerate=False)
