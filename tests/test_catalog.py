"""The instance-type catalog and what is derived from it."""

import pytest
from hypothesis import given, strategies as st

from rlinf_eks import catalog
from rlinf_eks.catalog import CATALOG, efa_interfaces_for, lookup, pod_shape_for


def test_catalog_has_every_type_of_the_field_notes_with_a_source():
    assert set(CATALOG) >= {
        "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
        "g6e.48xlarge", "g5.48xlarge", "g6.48xlarge", "g5.8xlarge", "g6e.8xlarge", "g5.2xlarge",
    }
    assert all(row.source for row in CATALOG.values())


@pytest.mark.parametrize(
    "name, interfaces",
    [("p4d.24xlarge", 4), ("p5.48xlarge", 32), ("p5en.48xlarge", 16), ("g6e.48xlarge", 4), ("g5.48xlarge", 1), ("g5.2xlarge", 0)],
)
def test_one_efa_interface_per_network_card(name, interfaces):
    layout = efa_interfaces_for(CATALOG[name])
    assert len(layout) == interfaces
    if interfaces:
        assert layout[0] == catalog.EfaInterface(0, 0, "efa")
        assert all(i.interface_type == "efa-only" and i.device_index == 1 for i in layout[1:])
        assert [i.network_card_index for i in layout] == list(range(interfaces))


def test_unknown_type_names_the_known_ones():
    with pytest.raises(catalog.UnknownInstanceType) as err:
        lookup("p9.huge")
    assert "p5.48xlarge" in str(err.value) and "instanceOverrides" in str(err.value)


def test_kube_reserved_cpu_follows_the_eks_ami_formula():
    # 60 + 10 + 5 + 5 + 2.5 * 188 = 550 millicores on 192 vCPUs
    assert catalog.kube_reserved_millicpu(192) == 550
    assert catalog.kube_reserved_millicpu(8) == 90


def test_p5_pod_fills_the_node():
    shape = pod_shape_for(CATALOG["p5.48xlarge"], hugepages_2mi_mib=5 * 1024, shm_fraction=0.4)
    assert (shape.gpus, shape.efa) == (8, 32)
    assert shape.cpu == "190"  # 192 vCPU - 0.55 kube-reserved - 1 for DaemonSets, whole CPUs
    alloc_cpu, alloc_mem = catalog.allocatable(CATALOG["p5.48xlarge"], 5 * 1024)
    assert shape.millicpu <= alloc_cpu and shape.memory_mib <= alloc_mem
    assert shape.memory_mib > 0.95 * alloc_mem
    assert shape.memory.endswith("Gi")


@given(
    name=st.sampled_from(sorted(CATALOG)),
    hugepages_gib=st.integers(min_value=0, max_value=8),
    shm_fraction=st.floats(min_value=0.05, max_value=0.9),
)
def test_pod_shape_always_fits_the_node_and_uses_all_gpus(name, hugepages_gib, shm_fraction):
    row = CATALOG[name]
    shape = pod_shape_for(row, hugepages_2mi_mib=hugepages_gib * 1024, shm_fraction=shm_fraction)
    alloc_cpu, alloc_mem = catalog.allocatable(row, hugepages_gib * 1024)
    assert 0 < shape.millicpu <= alloc_cpu - catalog.DAEMONSET_MILLICPU
    assert 0 < shape.memory_mib <= alloc_mem - catalog.DAEMONSET_MEMORY_MIB
    assert shape.shm_mib <= shape.memory_mib
    assert shape.gpus == row.gpus and shape.efa == row.max_efa


def test_given_a_p5_when_sized_then_the_pod_asks_for_no_more_memory_than_the_guest_kernel_reports():
    # the kubelet's capacity is MemTotal, which is below the advertised 2048 GiB (Karpenter's
    # VM_MEMORY_OVERHEAD_PERCENT estimate: 7.5%); a pod sized to the advertised RAM never schedules
    row = CATALOG["p5.48xlarge"]
    shape = pod_shape_for(row, hugepages_2mi_mib=5 * 1024, shm_fraction=0.4)
    assert shape.memory_mib + shape.hugepages_2mi_mib <= row.memory_gib * 1024 * (1 - 0.075)
