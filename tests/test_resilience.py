"""The plan's "Faults:" section (rlinf_eks.offline.resilience): what happens on each fault, per
launcher and trainer dialect."""

from __future__ import annotations

from rlinf_eks.offline import resilience
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
