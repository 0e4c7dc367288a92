"""The launch scripts: rendered values, bash syntax, and the manual launcher run for real against a
fake ``ray`` (CLI and Python module) to show the head waits, times out clearly, propagates the
trainer's exit status, and that workers join the head's address."""

from __future__ import annotations

import os
import shutil
import socket
import signal
import subprocess
import sys
import time
from pathlib import Path

import pulumi
import pytest

from rlinf_eks.workload import RlinfTraining, scripts
from rlinf_eks.workload.preflight import min_bus_bandwidth_gbps
from tests.harness import one, run_component, settings

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to check the rendered scripts")


def config_map_files(s, shared: bool = True) -> dict[str, str]:
    def program() -> None:
        RlinfTraining(
            "rlinf",
            settings=s,
            service_account_name="training-sa",
            bucket_name="bkt",
            shared_volume_claim=pulumi.Output.from_input("fsx-claim") if shared else None,
        )

    return one(run_component(program), "kubernetes:core/v1:ConfigMap")["inputs"]["data"]


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("launcher", ["manual", "kuberay"])
def test_given_any_stack_when_rendered_then_every_script_is_valid_bash(tmp_path, shared, launcher):
    s = settings(
        gpuNodes={"nodeCount": 2},
        kuberay={"enabled": launcher == "kuberay"},
        workload={"image": "x/y:1", "launcher": launcher},
        preflight={"enabled": True},
    )
    files = config_map_files(s, shared)
    assert "trainer.sh" in files and "preflight.sh" in files
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        result = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_given_manual_when_rendered_then_the_head_waits_for_every_node_and_workers_join_training_0():
    s = settings(gpuNodes={"nodeCount": 4}, workload={"image": "x/y:1", "joinTimeoutSeconds": 900})
    launch = config_map_files(s)["launch.sh"]
    assert "NNODES=4" in launch and "GPUS_PER_NODE=8" in launch
    assert "JOIN_TIMEOUT_SECONDS=900" in launch
    assert "HEAD_HOST=training-0.training-svc" in launch and "RAY_PORT=6379" in launch
    assert 'ray start --head --port="${RAY_PORT}" --dashboard-host=0.0.0.0' in launch
    assert 'ray start --address="${HEAD_HOST}:${RAY_PORT}"' in launch and "--block" in launch


def test_given_preflight_when_rendered_then_the_pass_mark_is_the_fraction_of_the_line_rate():
    s = settings(gpuNodes={"nodeCount": 2, "instanceType": "p4d.24xlarge"}, preflight={"enabled": True, "minBusBandwidthFraction": 0.6})
    text = config_map_files(s)["preflight.sh"]
    assert min_bus_bandwidth_gbps(s) == pytest.approx(0.6 * 400 / 8)
    assert f"MIN_BUS_BANDWIDTH_GBPS={min_bus_bandwidth_gbps(s)}" in text
    assert "EFA_PER_NODE=4" in text and "GPUS_PER_NODE=8" in text
    assert "EXCHANGE_DIR=/fsx/.preflight" in text
    assert "all_reduce_perf" in text


def test_given_one_node_when_preflight_then_only_the_node_checks_run():
    text = config_map_files(settings(preflight={"enabled": True}), shared=False)["preflight.sh"]
    assert "EXCHANGE_DIR=''" in text


# --- the manual launcher, run --------------------------------------------------------------------

FAKE_RAY_CLI = """#!/bin/bash
echo "$@" >> "$FAKE_RAY_LOG"
case " $* " in
  *" --block "*)
    if [ -n "${FAKE_BLOCK_SECONDS:-}" ]; then
      sleep "$FAKE_BLOCK_SECONDS" >/dev/null 2>&1 & raylet=$!
      trap 'kill "$raylet"; echo raylet-stopped >> "$FAKE_RAY_LOG"; exit 0' TERM
      wait "$raylet"
    fi
    exit "${FAKE_BLOCK_STATUS:-0}" ;;
esac
exit 0
"""

FAKE_RAY_MODULE = """
import os
def init(*args, **kwargs): pass
def shutdown(): pass
def nodes(): return [{"Alive": True}] * int(os.environ["FAKE_NODES"])
def cluster_resources(): return {"GPU": float(os.environ["FAKE_GPUS"])}
"""


@pytest.fixture
def fake_ray(tmp_path: Path) -> dict[str, str]:
    bin_dir, module_dir = tmp_path / "bin", tmp_path / "py" / "ray"
    bin_dir.mkdir()
    module_dir.mkdir(parents=True)
    (bin_dir / "ray").write_text(FAKE_RAY_CLI)
    (bin_dir / "ray").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    (module_dir / "__init__.py").write_text(FAKE_RAY_MODULE)
    (tmp_path / "state").mkdir()
    (tmp_path / "trainer.sh").write_text("echo trainer ran with RAY_ADDRESS=$RAY_ADDRESS PYTHONPATH=$PYTHONPATH\nexit 7\n")
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(tmp_path / "py"),
        "FAKE_RAY_LOG": str(tmp_path / "ray.log"),
    }


def write_launch(tmp_path: Path, *, head_host: str = "127.0.0.1", port: int = 6379, timeout: int = 60, grace: int = 900) -> Path:
    script = scripts.manual_launch(
        nnodes=2,
        gpus_per_node=8,
        cpus_per_node=180,
        object_store_bytes=1 << 30,
        head_host=head_host,
        ray_port=port,
        join_timeout_seconds=timeout,
        grace_seconds=grace,
        run_dir=str(tmp_path),
        state_dir=str(tmp_path / "state"),
        trainer_pythonpath="/workspace",
        trainer_script=str(tmp_path / "trainer.sh"),
    )
    (tmp_path / "launch.sh").write_text(script)
    return tmp_path / "launch.sh"


def run_launch(tmp_path: Path, env: dict[str, str], *, index: int, head_host: str = "127.0.0.1", port: int = 6379, timeout: int = 60) -> subprocess.CompletedProcess:
    launch = write_launch(tmp_path, head_host=head_host, port=port, timeout=timeout)
    return subprocess.run(
        [BASH, str(launch)],
        env={**env, "JOB_COMPLETION_INDEX": str(index), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_given_all_nodes_joined_when_the_head_runs_then_the_trainer_runs_and_its_status_is_the_pods(tmp_path, fake_ray):
    result = run_launch(tmp_path, {**fake_ray, "FAKE_NODES": "2", "FAKE_GPUS": "16"}, index=0)
    assert result.returncode == 7, result.stderr
    assert "trainer ran with RAY_ADDRESS=127.0.0.1:6379 PYTHONPATH=/workspace:" in result.stdout
    assert (tmp_path / "state" / "exit-code").read_text().strip() == "7"
    calls = Path(fake_ray["FAKE_RAY_LOG"]).read_text()
    assert "start --head --port=6379 --dashboard-host=0.0.0.0 --num-gpus=8 --num-cpus=180" in calls


def test_given_a_missing_node_when_the_join_timeout_passes_then_the_head_fails_with_a_clear_message(tmp_path, fake_ray):
    result = run_launch(tmp_path, {**fake_ray, "FAKE_NODES": "1", "FAKE_GPUS": "8"}, index=0, timeout=0)
    assert result.returncode != 0
    assert "did not form within 0s: 1 of 2 nodes and 8 of 16 GPUs joined" in result.stderr
    assert "trainer ran" not in result.stdout


def test_given_a_reachable_head_when_a_worker_starts_then_it_joins_the_head_address_and_blocks(tmp_path, fake_ray):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        result = run_launch(tmp_path, {**fake_ray, "FAKE_NODES": "2", "FAKE_GPUS": "16"}, index=1, port=port)
    assert result.returncode == 0, result.stderr
    calls = Path(fake_ray["FAKE_RAY_LOG"]).read_text()
    assert f"start --address=127.0.0.1:{port} --num-gpus=8 --num-cpus=180 --object-store-memory={1 << 30} --disable-usage-stats --block" in calls


def test_given_a_live_head_when_ray_on_a_worker_fails_then_the_worker_fails(tmp_path, fake_ray):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        result = run_launch(tmp_path, {**fake_ray, "FAKE_NODES": "2", "FAKE_GPUS": "16", "FAKE_BLOCK_STATUS": "1"}, index=1, port=port)
    assert result.returncode == 1
    assert "while the head still runs" in result.stderr




def test_given_a_checkpoint_being_written_when_a_worker_gets_sigterm_then_ray_stops_only_after_the_writes_settle(tmp_path, fake_ray):
    # Job deletion or a drain sends SIGTERM to every pod at once; stopping Ray on a worker at once
    # kills its ranks mid-way through their checkpoint shards while the head waits for them
    import signal
    import time

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        launch = write_launch(tmp_path, port=port, grace=6)  # settle budget: grace / 2 = 3 s
        proc = subprocess.Popen(
            [BASH, str(launch)],
            env={**fake_ray, "FAKE_BLOCK_SECONDS": "30", "JOB_COMPLETION_INDEX": "1", "HOME": str(tmp_path)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        log = Path(fake_ray["FAKE_RAY_LOG"])
        deadline = time.monotonic() + 20
        while "--block" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        (tmp_path / "global_step_10.pt").write_text("shard being written")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    assert "raylet-stopped" in log.read_text()
    assert elapsed >= 2.5, f"Ray stopped {elapsed:.1f}s after SIGTERM, before the checkpoint settled: {err}"
    assert proc.returncode == 0, err


def test_given_a_head_waiting_for_its_peers_when_stopped_then_it_exits_at_once(tmp_path, fake_ray):
    launch = write_launch(tmp_path, timeout=60)
    env = {**fake_ray, "FAKE_NODES": "1", "FAKE_GPUS": "8", "JOB_COMPLETION_INDEX": "0", "HOME": str(tmp_path)}
    proc = subprocess.Popen([BASH, str(launch)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)  # the head is up and waiting for the second node
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert elapsed < 5, f"took {elapsed:.1f}s to stop: bash as PID 1 held the pod"
    assert "stopped before training started" in err

