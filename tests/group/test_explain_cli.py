"""`kctl rebalance explain` end to end: flags or a scenario in, the simulator, rendering out."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from group.explain_support import GOLDEN, check_golden
from typer.testing import CliRunner

from kctl.cli.rebalance import app

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, ["explain", *args])
    return result


def lines(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


# ---------------------------------------------------------------- flags


def test_the_readme_example_compares_eager_with_sessioned():
    result = invoke(
        "--workers",
        "3",
        "--connectors",
        "2",
        "--tasks",
        "4",
        "--join",
        "w4",
        "--compare",
        "--width",
        "100",
    )
    assert result.exit_code == 0, result.output
    assert "connect: eager vs sessioned" in result.output
    doc = json.loads(
        invoke(
            "--workers",
            "3",
            "--connectors",
            "2",
            "--tasks",
            "4",
            "--join",
            "w4",
            "--compare",
            "-o",
            "json",
        ).stdout
    )
    eager, sessioned = doc["results"]["eager"], doc["results"]["sessioned"]
    # eager restarts every task that was running when w4 joined; sessioned only what moves to w4
    assert eager["summary"]["tasks_stopped"] >= 8
    assert sessioned["summary"]["tasks_stopped"] < eager["summary"]["tasks_stopped"]
    assert f"eager stops {eager['summary']['tasks_stopped']} tasks" in result.output


def test_json_output_is_the_simulators_document_for_the_flags():
    result = invoke(
        "--workers", "2", "--connectors", "1", "--tasks", "3", "--join", "w3", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "connect" and doc["protocol"] == "sessioned"
    assert doc["rounds"][0]["members"] == ["w1", "w2"]
    final_tasks = sorted(t for work in doc["final"].values() for t in work["tasks"])
    assert final_tasks == ["ct1-0", "ct1-1", "ct1-2"]
    assert set(doc["final"]) == {"w1", "w2", "w3"}


def test_yaml_output_carries_the_same_document_as_json():
    args = (
        "--kind",
        "consumer",
        "--workers",
        "2",
        "--topics",
        "1",
        "--partitions",
        "4",
        "--join",
        "C2",
    )
    as_json = json.loads(invoke(*args, "-o", "json").stdout)
    as_yaml = yaml.safe_load(invoke(*args, "-o", "yaml").stdout)
    assert as_yaml == as_json
    owned = sorted(p for parts in as_json["final"].values() for p in parts)
    assert owned == ["T0-0", "T0-1", "T0-2", "T0-3"]


def test_a_crash_flag_tells_the_story_up_to_the_lost_work_being_reassigned():
    result = invoke(
        "--workers",
        "3",
        "--connectors",
        "1",
        "--tasks",
        "3",
        "--crash",
        "w3",
        "--delay",
        "30000",
        "-o",
        "json",
    )
    doc = json.loads(result.stdout)
    assert "w3" not in doc["final"]
    assert sorted(t for w in doc["final"].values() for t in w["tasks"]) == [
        "ct1-0",
        "ct1-1",
        "ct1-2",
    ]
    assert any(r["delay_ms"] > 0 for r in doc["rounds"])


def test_trace_adds_the_message_sequence_under_each_round():
    plain = invoke("--workers", "2", "--connectors", "1", "--tasks", "2", "--width", "100").output
    traced = invoke(
        "--workers", "2", "--connectors", "1", "--tasks", "2", "--trace", "--width", "100"
    ).output
    assert "JoinGroup" not in plain
    assert "JoinGroup" in traced and "SyncGroupResponse" in traced
    assert traced.count("round 1 ·") == plain.count("round 1 ·") == 1


# ---------------------------------------------------------------- errors


def test_a_bad_scenario_is_one_error_line_and_exit_code_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: connect\nprotocol: sessioned\nworkers: [w1]\nevents:\n  - {jion: w2}\n")
    result = invoke("--scenario", str(bad))
    assert result.exit_code == 2
    out = result.stderr.strip()
    assert out.startswith(f"error: {bad}: ")
    assert len(out.splitlines()) == 1
    assert out.endswith("events[0]: unknown event 'jion' for kind connect (known: join, leave, "
                        "crash, pause, advance_ms, connector_add, connector_remove, "
                        "tasks_change)"), out


def test_unparseable_yaml_and_missing_files_are_config_errors(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [connect\n")
    result = invoke("--scenario", str(broken))
    assert result.exit_code == 2
    assert "not valid YAML at line" in result.stderr
    missing = invoke("--scenario", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2
    assert "cannot read scenario" in missing.stderr


def test_an_unknown_protocol_flag_is_refused_with_exit_code_2():
    result = invoke("--protocol", "zigzag")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")


def test_the_cli_module_does_not_import_spark():
    code = "import sys, kctl.cli.rebalance; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---------------------------------------------------------------- goldens from the simulator


def test_golden_seed_000_compare():
    result = invoke(
        "--scenario", str(SCENARIOS / "connect-seed-000.yaml"), "--compare", "--width", "100"
    )
    assert result.exit_code == 0, result.output
    check_golden("seed_000_compare.txt", lines(result.stdout))


def test_golden_worker_crash_with_delay():
    result = invoke(
        "--scenario", str(SCENARIOS / "connect-worker-crash-delay.yaml"), "--width", "100"
    )
    assert result.exit_code == 0, result.output
    check_golden("connect_worker_crash_delay.txt", lines(result.stdout))


def test_golden_cooperative_sticky_with_trace():
    result = invoke(
        "--scenario",
        str(SCENARIOS / "consumer-cooperative-sticky.yaml"),
        "--trace",
        "--width",
        "100",
    )
    assert result.exit_code == 0, result.output
    check_golden("consumer_cooperative_sticky_trace.txt", lines(result.stdout))


def test_goldens_have_fixed_width_and_no_colour_codes():
    for path in GOLDEN.glob("*.txt"):
        text = path.read_text(encoding="utf-8")
        assert "\x1b[" not in text, path.name
        assert max(len(line) for line in text.splitlines()) <= 100, path.name


def test_golden_worker_join_under_eager():
    result = invoke(
        "--scenario", str(SCENARIOS / "connect-worker-join-eager.yaml"), "--width", "100"
    )
    assert result.exit_code == 0, result.output
    check_golden("connect_worker_join_eager.txt", lines(result.output))


def test_golden_paused_worker_trace_shows_unknown_member_id():
    result = invoke(
        "--scenario", str(SCENARIOS / "connect-worker-paused.yaml"), "--trace", "--width", "100"
    )
    assert result.exit_code == 0, result.output
    assert "UNKNOWN_MEMBER_ID" in result.stdout
    check_golden("connect_worker_paused_trace.txt", lines(result.stdout))


# ---------------------------------------------------------------- the installed entry point

GOLDEN_RUNS = [
    ("seed_000_compare.txt", ["--scenario", str(SCENARIOS / "connect-seed-000.yaml"),
                              "--compare"]),
    ("connect_worker_crash_delay.txt",
     ["--scenario", str(SCENARIOS / "connect-worker-crash-delay.yaml")]),
    ("consumer_cooperative_sticky_trace.txt",
     ["--scenario", str(SCENARIOS / "consumer-cooperative-sticky.yaml"), "--trace"]),
    ("connect_worker_join_eager.txt",
     ["--scenario", str(SCENARIOS / "connect-worker-join-eager.yaml")]),
    ("connect_worker_paused_trace.txt",
     ["--scenario", str(SCENARIOS / "connect-worker-paused.yaml"), "--trace"]),
]


@pytest.mark.parametrize(("golden", "args"), GOLDEN_RUNS, ids=[g for g, _ in GOLDEN_RUNS])
def test_goldens_through_the_installed_kctl_command(golden, args):
    """What a user's shell runs: the console script pip installed, in its own process with
    its stdout a pipe, prints the same as the goldens."""
    kctl = shutil.which("kctl")
    assert kctl, "the kctl console script is not installed (pip install -e .)"
    r = subprocess.run([kctl, "rebalance", "explain", *args, "--width", "100"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    check_golden(golden, lines(r.stdout))
