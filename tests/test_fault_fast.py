"""Fail fast, run for real: the rendered progress.sh and fabric-check.sh against fake trainers and
a fake libfabric (hang, steady progress, a Capacity Block ending, a dead fabric), with bounds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from rlinf_eks.workload import exit_codes, fabric, progress
from rlinf_eks.workload.run import pod_shape
from rlinf_eks.offline.outputs.plan import settings_of
from rlinf_eks.offline.engine.stack_config import load
from tests.harness import ROOT, SAVING_EVERY_2S, saves_logged


def settings(stack: str, *sets: str):
    return settings_of(load(ROOT, stack, list(sets)))

HANGING_TRAINER = """
import sys, time
print("step 1 done", flush=True)
time.sleep(3600)
"""

# prints a line every 0.3 s for 4 s, then exits 0: never idle for the watchdog's timeout
STEADY_TRAINER = """
import time
for i in range(14):
    print(f"step {i}", flush=True)
    time.sleep(0.3)
"""

# silent, but writes a new global_step_N directory every 0.5 s (a quiet trainer making progress)
QUIET_CHECKPOINTING_TRAINER = """
import os, sys, time
for i in range(1, 9):
    os.makedirs(os.path.join(sys.argv[1], "checkpoints", f"global_step_{i}"), exist_ok=True)
    time.sleep(0.5)
"""

# reports the signals it gets; exits 130 on SIGINT as a KeyboardInterrupt would
SIGNAL_REPORTING_TRAINER = """
import os, signal, sys, time
def on_int(signum, frame):
    print("trainer: got SIGINT", flush=True)
    sys.exit(130)
signal.signal(signal.SIGINT, on_int)
print("trainer: training", flush=True)
while True:
    time.sleep(0.1)
"""


def supervise(tmp_path: Path, trainer: str, *, timeout_seconds=None, stop_at_time=None, budget=6, scan=0.5, quiet=30, wait=60, args=()):
    (tmp_path / "trainer.py").write_text(trainer)
    script = tmp_path / "progress.sh"
    script.write_text(
        progress.progress_script(
            run_dir=str(tmp_path), timeout_seconds=timeout_seconds, stop_at_time=stop_at_time, stop_budget_seconds=budget, scan_seconds=scan,
            settle_quiet_seconds=quiet,
        )
    )
    started = time.monotonic()
    # a process group of its own, as the manual launcher's `set -m` gives it
    proc = subprocess.Popen(
        ["bash", str(script), sys.executable, str(tmp_path / "trainer.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, out, err, time.monotonic() - started


def test_given_a_hanging_trainer_when_no_output_for_the_timeout_then_it_is_stopped_and_the_pod_fails_with_progress_timeout(tmp_path):
    # a 60 s minimum in config; the script itself takes any timeout, so the test runs in seconds
    code, out, err, took = supervise(tmp_path, HANGING_TRAINER, timeout_seconds=2)
    assert code == exit_codes.PROGRESS_TIMEOUT, err
    assert "step 1 done" in out  # the trainer's output is relayed unchanged
    assert "no output and no new checkpoint step" in err
    assert 2 <= took < 10, took  # stopped at the timeout (SIGINT ends this trainer at once), not at the hour
    # the trainer's process is gone: its GPUs would be free
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "trainer.py")], capture_output=True).returncode == 1


def test_given_a_trainer_that_ignores_sigint_when_it_hangs_then_sigterm_and_sigkill_end_it_within_the_budget(tmp_path):
    trainer = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)\n"
    code, _, err, took = supervise(tmp_path, trainer, timeout_seconds=1, budget=4)
    assert code == exit_codes.PROGRESS_TIMEOUT, err
    assert took < 1 + 4 + 4, took  # timeout + stop budget (+ start-up slack)


def test_given_a_trainer_that_keeps_printing_when_supervised_then_it_is_never_stopped_and_its_status_passes_through(tmp_path):
    code, out, err, _ = supervise(tmp_path, STEADY_TRAINER + "\nraise SystemExit(7)\n", timeout_seconds=1)
    assert code == 7, err
    assert "step 13" in out


def test_given_a_silent_trainer_that_writes_new_checkpoint_steps_then_that_counts_as_progress(tmp_path):
    code, _, err, took = supervise(tmp_path, QUIET_CHECKPOINTING_TRAINER, timeout_seconds=2, scan=0.3, args=(str(tmp_path),))
    assert code == 0, err
    assert took >= 3.5  # ran its 4 s, far past the 2 s timeout without output


def test_given_a_capacity_block_stop_time_when_it_passes_then_the_trainer_gets_sigint_and_the_pod_exits_reservation_ending(tmp_path):
    stop = datetime.now(timezone.utc) + timedelta(seconds=2)
    code, out, err, took = supervise(tmp_path, SIGNAL_REPORTING_TRAINER, stop_at_time=stop, budget=6)
    assert code == exit_codes.RESERVATION_ENDING, err
    assert "trainer: got SIGINT" in out
    assert "Capacity Block" in err
    assert took < 2 + 6 + 4, took


def test_given_a_checkpoint_being_written_when_the_block_ends_then_the_stop_waits_for_the_writes_to_settle(tmp_path):
    # writes into global_step_3 until 2.5 s after the stop time: the SIGINT comes only after that
    trainer = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: (print(f'SIGINT after {time.time() - float(sys.argv[2]):.1f}', flush=True), sys.exit(130)))\n"
        "d = os.path.join(sys.argv[1], 'checkpoints', 'global_step_3'); os.makedirs(d)\n"
        "while time.time() < float(sys.argv[2]) + 2.5:\n"
        "    open(os.path.join(d, 'shard'), 'a').write('x'); time.sleep(0.2)\n"
        "time.sleep(3600)\n"
    )
    # the script takes whole seconds: the stop time as rendered
    stop = datetime.fromtimestamp(int(time.time()) + 2, timezone.utc)
    code, out, err, _ = supervise(tmp_path, trainer, stop_at_time=stop, budget=60, quiet=2, args=(str(tmp_path), str(stop.timestamp())))
    assert code == exit_codes.RESERVATION_ENDING, err
    waited = float(out.split("SIGINT after ")[1].split()[0])
    # settled once nothing under checkpoints/ changed for the quiet time (2 s here, 30 s rendered),
    # counted from the last write: within one write interval (0.2 s, and the printed rounding)
    # before the 2.5 s the trainer writes for
    assert 2.5 - 0.3 + 2 <= waited <= 2.5 + 2 + 2.5, waited


def test_given_a_trainer_that_checkpoints_every_2s_when_the_block_ends_then_it_is_stopped_once_the_write_in_progress_ended(tmp_path):
    # never quiet for the 30 s: the settle waited out its whole share of the budget (60 s here)
    log = tmp_path / "saves.log"
    stop = datetime.fromtimestamp(int(time.time()) + 4, timezone.utc)
    code, _, err, took = supervise(tmp_path, SAVING_EVERY_2S, stop_at_time=stop, budget=120, args=(str(tmp_path), str(log)), wait=150)
    began, saved = saves_logged(log.read_text())
    assert code == exit_codes.RESERVATION_ENDING, err
    assert "KeyboardInterrupt" in log.read_text().splitlines()[-1], err
    # the settle starts after the stop time: every save begun before it returned
    assert all(step in saved for step, when in began.items() if when < stop.timestamp()), (began, saved, err)
    assert took < 4 + 30, f"{took:.1f}s: the stop waited for the later saves to stop: {err}"


def test_given_a_capacity_block_stack_when_rendered_then_the_stop_time_is_40_minutes_plus_the_grace_period_before_the_end():
    s = settings("capacity-block")
    end = s.gpu_nodes.capacity_block.end_time
    assert progress.stop_at(s) == end - timedelta(minutes=40) - timedelta(seconds=s.workload.termination_grace_period_seconds)
    script = progress.for_stack(s, "/fsx/run")
    assert f"PROGRESS_STOP_AT_EPOCH={int(progress.stop_at(s).timestamp())}" in script
    assert "PROGRESS_TIMEOUT_SECONDS=1800" in script
    assert progress.stop_at(settings("single-node")) is None


# --- the fabric ------------------------------------------------------------------------------------


def fake_node(tmp_path: Path, *, devices: int, fi_info: str, plugin: bool) -> dict[str, str]:
    """A fake /dev/infiniband (via a patched ls path), fi_info and aws-ofi-nccl library."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dev = tmp_path / "infiniband"
    dev.mkdir()
    for i in range(devices):
        (dev / f"uverbs{i}").touch()
    (bin_dir / "fi_info").write_text(f"#!/bin/bash\n{fi_info}\n")
    (bin_dir / "fi_info").chmod(0o755)
    lib = tmp_path / "lib"
    lib.mkdir()
    if plugin:
        (lib / "libnccl-net.so").touch()
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "LD_LIBRARY_PATH": str(lib), "DEV": str(dev)}


def run_fabric_check(tmp_path: Path, env: dict[str, str], *, efa: int = 32, fi_timeout: int = fabric.FI_INFO_TIMEOUT_SECONDS):
    s = settings("multi-node")
    shape = pod_shape(s, sync=False)
    assert shape.efa == efa
    script = fabric.fabric_check_script(s, shape=shape, fi_info_timeout_seconds=fi_timeout)
    # the fake node's device directory instead of /dev/infiniband; no linker cache to fall back on
    script = script.replace("/dev/infiniband/", env["DEV"] + "/").replace("ldconfig -p", "true")
    assert script.count(env["DEV"]) == 1
    (tmp_path / "fabric-check.sh").write_text(script)
    started = time.monotonic()
    done = subprocess.run(["bash", str(tmp_path / "fabric-check.sh")], env=env, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


def domains(n: int) -> str:
    return "\n".join(f'echo "provider: efa"; echo "    domain: rdmap{i}s0-rdm"' for i in range(n))


def test_given_a_healthy_efa_node_when_the_fabric_check_runs_then_it_passes(tmp_path):
    done, _ = run_fabric_check(tmp_path, fake_node(tmp_path, devices=32, fi_info=domains(32), plugin=True))
    assert done.returncode == 0, done.stderr
    assert "OK: 32 EFA devices, 32 libfabric efa domains" in done.stderr


@pytest.mark.parametrize(
    "devices, fi_info, plugin, reason",
    [
        (0, domains(32), True, "/dev/infiniband has 0 EFA devices"),
        (32, "exit 1", True, "shows 0 EFA domains"),
        (32, domains(32), False, "no NCCL net plugin"),
    ],
    ids=["no-devices", "no-efa-provider", "no-aws-ofi-nccl"],
)
def test_given_a_dead_fabric_when_the_fabric_check_runs_then_the_pod_fails_at_once_naming_it(tmp_path, devices, fi_info, plugin, reason):
    done, took = run_fabric_check(tmp_path, fake_node(tmp_path, devices=devices, fi_info=fi_info, plugin=plugin))
    assert done.returncode == exit_codes.FABRIC_FAILED
    assert reason in done.stderr
    assert took < 5


def test_given_an_image_without_ld_library_path_when_the_plugin_is_missing_then_the_check_still_fails_with_fabric_failed(tmp_path):
    # many images set no LD_LIBRARY_PATH (the plugin sits in the linker cache): set -u must not turn the miss into exit 1
    env = fake_node(tmp_path, devices=32, fi_info=domains(32), plugin=False)
    del env["LD_LIBRARY_PATH"]
    done, _ = run_fabric_check(tmp_path, env)
    assert done.returncode == exit_codes.FABRIC_FAILED, done.stderr
    assert "no NCCL net plugin" in done.stderr
    assert "unbound variable" not in done.stderr


def test_given_a_hung_efa_driver_when_the_fabric_check_runs_with_the_stacks_timeout_then_the_pod_fails_within_a_minute(tmp_path):
    # fi_info hangs for ever, the pod still fails in time. The stacks render the default timeout; the
    # script runs here with a 2 s one (the test waits on no production timeout): it fails after that
    # timeout plus at most what a minute leaves beyond the stacks' 15 s.
    from tests.harness import manifests, plan_stack

    assert fabric.FI_INFO_TIMEOUT_SECONDS == 15
    rendered = manifests(plan_stack("multi-node"))["configmap-rlinf-rlinf-launch.yaml"]["data"]["fabric-check.sh"]
    assert "\nFI_INFO_TIMEOUT_SECONDS=15\n" in rendered
    short = 2
    done, took = run_fabric_check(tmp_path, fake_node(tmp_path, devices=32, fi_info="sleep 3600", plugin=True), fi_timeout=short)
    assert done.returncode == exit_codes.FABRIC_FAILED, done.stderr
    assert f"within {short}s" in done.stderr
    assert short <= took < short + (60 - fabric.FI_INFO_TIMEOUT_SECONDS), took


def test_given_an_efa_stack_then_nccl_is_pinned_to_aws_ofi_nccl_and_torch_tears_down_on_nccl_errors():
    from rlinf_eks.workload.env import network_env

    env = network_env(settings("multi-node"))
    assert env["NCCL_NET"] == "AWS Libfabric"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == "600"
    no_efa = network_env(settings("multi-node", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true"))
    assert "NCCL_NET" not in no_efa and no_efa["TORCH_NCCL_ENABLE_MONITORING"] == "1"


# --- node health ------------------------------------------------------------------------------------


def test_given_a_stack_then_the_gpu_node_group_auto_repairs_and_the_node_monitoring_agent_reports_its_health():
    from tests.harness import of_type, one, plan_stack

    plan = plan_stack("multi-node")
    gpu = one(plan, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")
    assert gpu["inputs"]["nodeRepairConfig"] == {"enabled": True}
    # the system nodes run no training: nothing to repair there for the run's sake
    assert "nodeRepairConfig" not in one(plan, "aws:eks/nodeGroup:NodeGroup", "rlinf-system")["inputs"]
    agent = one(plan, "aws:eks/addon:Addon", "rlinf-eks-node-monitoring-agent")
    assert agent["inputs"]["addonName"] == "eks-node-monitoring-agent"
    assert "serviceAccountRoleArn" not in agent["inputs"]  # the agent calls no AWS API

    off = plan_stack("multi-node", "gpuNodes.autoRepair=false")
    assert "nodeRepairConfig" not in one(off, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")["inputs"]
    assert not [a for a in of_type(off, "aws:eks/addon:Addon") if a["inputs"]["addonName"] == "eks-node-monitoring-agent"]


# --- what the plan prints ---------------------------------------------------------------------------


def test_given_a_capacity_block_when_planned_then_the_plan_prints_its_end_the_time_left_and_the_stop_time():
    from rlinf_eks.offline.outputs import resilience

    s = settings("capacity-block")
    end = s.gpu_nodes.capacity_block.end_time
    text = resilience.render(s, "capacity-block", now=end - timedelta(days=2, hours=3, minutes=5))
    assert "Capacity Block ends 2031-01-20T11:30:00Z (2d 3h 05m left)" in text
    assert "EC2 warns at 2031-01-20T10:50:00Z" in text
    assert "stopped from 2031-01-20T10:35:00Z" in text  # 40 min + the 900 s grace period before the end
    assert f"exits {exit_codes.RESERVATION_ENDING}" in text
    late = resilience.render(s, "capacity-block", now=end - timedelta(minutes=50))
    assert "the stop time has passed" in late
    assert "Capacity Block ended" in resilience.render(s, "capacity-block", now=end + timedelta(hours=1))
    assert "reservation" not in resilience.render(settings("single-node"), "single-node")


def test_given_any_stack_when_planned_then_the_plan_says_what_happens_on_a_dead_fabric_a_hang_and_a_bad_node():
    from rlinf_eks.offline.outputs import resilience

    text = resilience.render(settings("multi-node"), "multi-node")
    assert "NCCL_NET='AWS Libfabric'" in text and f"exit {exit_codes.FABRIC_FAILED}" in text
    assert f"exits {exit_codes.PROGRESS_TIMEOUT}" in text and "0h 30m" in text
    assert "node auto repair replaces it" in text
    base = settings("multi-node", "gpuNodes.autoRepair=false", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true")
    # null cannot be given through --set (a string there): the stack file's null, as the model holds it
    off = resilience.render(base.model_copy(update={"workload": base.workload.model_copy(update={"progress_timeout_seconds": None})}), "multi-node")
    assert "progress watchdog off" in off and "auto repair off" in off and "TCP sockets" in off


@pytest.mark.parametrize("value", ["true", "59", "'1800'"])
def test_given_a_bad_progress_timeout_then_the_config_is_rejected_naming_the_key(value):
    from rlinf_eks.config import ConfigError

    with pytest.raises(ConfigError, match="progressTimeoutSeconds"):
        settings("multi-node", f"workload.progressTimeoutSeconds={value}")


def test_given_an_efa_stack_when_planned_then_every_training_pod_checks_its_fabric_first_with_the_ray_containers_devices():
    from tests.harness import manifests, plan_stack

    # without restarts the Indexed Job; with them (the multi-node stack's own) the JobSet's Job,
    # where the restart backoff comes first; the image check (test_image_check.py) and the config
    # check (test_config_check.py) always precede it
    job = manifests(plan_stack("multi-node", "workload.restart.maxRestarts=0"))["job-rlinf-training.yaml"]
    jobset = manifests(plan_stack("multi-node"))["jobset-rlinf-training.yaml"]
    for spec, before in (
        (job["spec"]["template"]["spec"], ["image-check", "config-check"]),
        (jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"], ["restart-backoff", "image-check", "config-check"]),
    ):
        names = [c["name"] for c in spec["initContainers"]]
        assert names[: len(before) + 1] == [*before, "fabric-check"]
        check = spec["initContainers"][len(before)]
        assert check["image"] == spec["containers"][0]["image"]
        assert check["resources"] == spec["containers"][0]["resources"]  # the same EFA devices, handed on
        assert check["command"] == ["/bin/bash", "/etc/rlinf/fabric-check.sh"]
    no_efa = manifests(plan_stack("multi-node", "gpuNodes.efa=false", "gpuNodes.allowTcpFabric=true", "workload.restart.maxRestarts=0"))["job-rlinf-training.yaml"]
    assert "fabric-check" not in [c["name"] for c in no_efa["spec"]["template"]["spec"].get("initContainers", [])]


# --- through the manual launcher --------------------------------------------------------------------

from tests.test_workload_scripts import BASH, fake_ray, write_launch  # noqa: E402,F401  (fixture)


def test_given_the_manual_launcher_when_its_trainer_hangs_then_the_head_pod_exits_progress_timeout_and_ray_stops(tmp_path, fake_ray):
    launch = write_launch(tmp_path, grace=30)
    (tmp_path / "progress.sh").write_text(
        progress.progress_script(run_dir=str(tmp_path), timeout_seconds=2, stop_at_time=None, stop_budget_seconds=6)
    )
    (tmp_path / "trainer.sh").write_text("echo step 1\nexec sleep 3600\n")
    started = time.monotonic()
    done = subprocess.run(
        [BASH, str(launch)],
        env={**fake_ray, "FAKE_NODES": "2", "FAKE_GPUS": "16", "JOB_COMPLETION_INDEX": "0", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == exit_codes.PROGRESS_TIMEOUT, done.stderr
    assert (tmp_path / "state" / "exit-code").read_text().strip() == str(exit_codes.PROGRESS_TIMEOUT)
    assert "step 1" in done.stdout
    assert "stop --force" in (tmp_path / "ray.log").read_text()  # Ray stopped: the GPUs are free
    assert time.monotonic() - started < 20
