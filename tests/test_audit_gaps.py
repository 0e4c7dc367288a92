"""Focused tests for gaps found by a mutation audit: each pins a figure that otherwise only the
golden snapshots caught (a re-recorded snapshot would have hidden the regression)."""

from __future__ import annotations

import pytest

from rlinf_eks import catalog


@pytest.mark.parametrize(
    "name, expected_max_pods",
    [("p5.48xlarge", 250), ("p4d.24xlarge", 250), ("g5.2xlarge", 110)],
)
def test_given_an_instance_when_sized_then_kube_reserved_memory_follows_the_eks_ami_formula(name, expected_max_pods):
    # amazon-eks-ami: 255 MiB + 11 MiB per pod the node may run (maxPods 250 above 30 vCPU, else 110)
    instance = catalog.lookup(name)
    assert catalog.max_pods(instance) == expected_max_pods
    assert catalog.kube_reserved_memory_mib(instance) == 255 + 11 * expected_max_pods


def test_given_a_p5_when_sized_then_allocatable_memory_leaves_out_kube_reserved_eviction_and_hugepages():
    p5 = catalog.lookup("p5.48xlarge")
    capacity = catalog.memory_capacity_mib(p5)
    _, memory = catalog.allocatable(p5, hugepages_2mi_mib=5120)
    # kube-reserved (255 + 11 * 250 = 3005 MiB) + evictionHard (100 MiB) + hugepages (5120 MiB)
    assert memory == capacity - 3005 - 100 - 5120
