"""The checked-in AWS name lists match botocore's models (regenerate: python -m rlinf_eks.aws_names)."""

from pathlib import Path

import botocore

from rlinf_eks import aws_names, catalog

REGENERATE = "stale list: run `python -m rlinf_eks.aws_names` and commit components/aws_names.py"


def test_the_lists_come_from_the_pinned_botocore():
    assert botocore.__version__ == aws_names.BOTOCORE_VERSION, REGENERATE


def test_regions_equal_botocore_partitions():
    assert aws_names.REGIONS == aws_names.botocore_regions(), REGENERATE
    assert {"us-east-1", "us-gov-west-1", "cn-north-1"} <= aws_names.REGIONS
    assert not any(region.endswith("-global") for region in aws_names.REGIONS)


def test_instance_types_equal_the_ec2_enum():
    assert aws_names.EC2_INSTANCE_TYPES == aws_names.botocore_instance_types(), REGENERATE


def test_every_catalog_and_capacity_block_type_is_a_real_ec2_type():
    assert set(catalog.CATALOG) <= aws_names.EC2_INSTANCE_TYPES
    assert catalog.CAPACITY_BLOCK_TYPES <= aws_names.EC2_INSTANCE_TYPES


def test_regenerating_reproduces_the_checked_in_file(tmp_path):
    source = Path(aws_names.__file__)
    copy = tmp_path / "aws_names.py"
    copy.write_text(source.read_text().replace("us-east-1 ", "", 1))  # drift the copy
    aws_names.regenerate(copy)
    assert copy.read_text() == source.read_text(), REGENERATE
