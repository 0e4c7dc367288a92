"""The plan's "Faults:" section (rlinf_eks.offline.outputs.resilience): what happens on each fault, per
launcher and trainer dialect."""

from __future__ import annotations

from rlinf_eks.offline.outputs import resilience
from tests.harness import settings


def test_manual_rlinf_on_fsx_names_the_marker_the_resume_key_and_the_repeated_failure_exit():
    s = settings(gpuNodes={"nodeCount": 2}, workload={"image": "x/y:1", "trainer": {"dialect": "rlinf-embodied"}})
    text = resilience.render(s, "multi-node")
    assert text.startswith("Faults:\n")
    assert ".rlinf-eks-complete" in text and "resume: the newest complete checkpoint, passed as runner.resume_dir" in text
    assert "backoffLimit 0" in text and "exits 86" in text
    assert "the S3 export holds it unmarked" in text


def test_verl_ppo_says_plainly_that_it_cannot_resume():
    s = settings(workload={"image": "x/y:1", "trainer": {"dialect": "verl-ppo"}})
    assert "resume: none: verl-ppo (SimpleVLA-RL) cannot resume" in resilience.render(s, "single-node")


def test_kuberay_embodied_shows_the_rayjob_retries():
    s = settings(kuberay={"enabled": True}, workload={"image": "x/y:1", "launcher": "kuberay", "rayjob": {"backoffLimit": 3}})
    assert "up to backoffLimit=3 times, each with a new cluster" in resilience.render(s, "single-node")
    s0 = settings(kuberay={"enabled": True}, workload={"image": "x/y:1", "launcher": "kuberay"})
    assert "backoffLimit is 0" in resilience.render(s0, "single-node")


def test_no_workload_no_faults_section():
    off = resilience.render(settings(workload={"enabled": False}), "single-node")
    assert "  checkpoints:" not in off and "  restart (" not in off and "  hang:" not in off
    assert resilience.render(None, "single-node") == ""


def test_the_plan_says_when_a_run_that_never_starts_or_never_ends_gives_its_gpus_back():
    manual = resilience.render(settings(), "single-node")
    assert "deadline: pods not all Running 1h 00m after the Job's start" in manual
    assert "no limit on the whole run" in manual
    timed = resilience.render(settings(workload={"manual": {"activeDeadlineSeconds": 86400}}), "single-node")
    assert "deadline: the whole run fails after 1d 0h 00m" in timed
    kuberay = resilience.render(settings(kuberay={"enabled": True}, workload={"launcher": "kuberay"}), "single-node")
    assert "a RayJob not Running 1h 00m after submission fails" in kuberay


# --- Spot interruptions and the render check -----------------------------------------------------


def _faults(stack: str, *sets: str) -> str:
    from rlinf_eks.offline.outputs.plan import settings_of
    from rlinf_eks.offline.engine.stack_config import load
    from tests.harness import ROOT

    return resilience.render(settings_of(load(ROOT, stack, list(sets))), stack)


def test_spot_nodes_say_what_an_interruption_does_what_is_lost_and_what_resumes():
    text = _faults("multi-node", "gpuNodes.capacityType=SPOT", "workload.restart.maxRestarts=3")
    assert "spot: EC2 reclaims a Spot node with a 2-minute notice; the managed node group drains the node" in text
    assert "the instance stops 120s after the notice" in text
    # the grace period outlasts the notice: the save in flight is cut off, never counted
    assert "terminationGracePeriodSeconds (900s) outlasts the notice" in text and "never marked complete, never resumed from" in text
    assert "lost: every step after the newest complete checkpoint on FSx" in text
    assert "spot: resumes: the JobSet restarts the gang on a new node from the newest complete checkpoint" in text
    assert "without counting the interruption against maxRestarts=3 (rule NodeFault)" in text
    assert "spot: warning" not in text


def test_spot_without_restarts_warns_that_an_interruption_ends_the_run():
    text = _faults("quickstart", "gpuNodes.capacityType=SPOT")
    assert "spot: warning: workload.restart.maxRestarts is 0: an interruption ends the run and nothing restarts it" in text
    # local run directory: only what reached S3 survives the node
    assert "lost: every step after the newest complete checkpoint already in S3 (uploaded every 300s" in text
    kuberay = _faults("multi-node-kuberay", "gpuNodes.capacityType=SPOT")
    assert "spot: warning: workload.restart.maxRestarts is 0" in kuberay
    retried = _faults("multi-node-kuberay", "gpuNodes.capacityType=SPOT", "workload.restart.maxRestarts=2")
    assert "spot: resumes: KubeRay retries the RayJob" in retried and "counts against backoffLimit=2" in retried


def test_spot_says_a_dialect_that_cannot_resume_starts_over_and_karpenter_drains_from_its_queue():
    assert "restarts from step 0 (the dialect cannot resume)" in _faults("single-node", "gpuNodes.capacityType=SPOT")
    karpenter = _faults("multi-node", "gpuNodes.capacityType=SPOT", "gpuNodes.provisioner=karpenter")
    assert "Karpenter reads the notice from its interruption queue and drains the node" in karpenter


def test_on_demand_nodes_have_no_spot_lines():
    assert "spot:" not in _faults("multi-node")


def test_the_render_check_is_in_the_faults_of_the_configs_that_render_only():
    text = _faults("quickstart")
    assert "render: a render-check init container renders one maniskill frame (SAPIEN's Vulkan renderer on the GPU)" in text
    assert "(exit 98, one line naming the remedy)" in text and "imageio, MP4" in text
    assert "render:" not in _faults("vllm-rollout") and "render:" not in _faults("single-node")
