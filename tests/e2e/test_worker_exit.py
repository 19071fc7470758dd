"""A stopped worker's process ends, whatever threads its connectors left behind."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.launch import EXIT_GRACE_S

pytestmark = [pytest.mark.slow]


def test_ctrl_c_ends_the_process_even_when_a_task_left_a_thread_running(tmp_path):
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(json.dumps({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER}))
    (tmp_path / "lingering.json").write_text(json.dumps({
        "name": "lingering", "connector.class": "support.connectors.LingeringSourceConnector",
        "topic": "numbers", "count": 10}))
    w.start(tmp_path / "lingering.json")
    wait_until(lambda: w.status("lingering")["tasks"]
               and w.status("lingering")["tasks"][0]["state"] == "RUNNING",
               message="the task running (its lingering thread started)")

    # the user presses Ctrl-C: the worker stops, and then the process must end too
    assert w.proc is not None
    w.proc.send_signal(signal.SIGINT)
    try:
        code = w.proc.wait(EXIT_GRACE_S + 30)
    except subprocess.TimeoutExpired:
        w.kill()
        raise AssertionError("the process outlived its stopped worker:\n"
                             + w.log()[-3000:]) from None
    log = w.log()
    assert code == 0, log[-3000:]
    assert "worker stopped" in log
    # it waited for a clean exit first, then said what held the process
    assert "did not exit within" in log and "library-thread-that-lingers" in log, log[-3000:]
