"""The documentation's examples really work: the foreign Pulumi program under "Using the components
in your own Pulumi program" (docs/components.md) runs under mocks against the real constructor
signatures; the plan commands, the Quick start's test command, the training image and the
before-you-deploy sections say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

from tests import docs_text
from tests.harness import ALL_STACKS, ROOT, has_inputs, one, run_component

COMPONENTS = docs_text.DOCS / "components.md"
SECTION = "## Using the components in your own Pulumi program"


def readme_python_blocks(section: str) -> list[str]:
    """The ```python blocks of one section of docs/components.md (up to the next ``## `` heading)."""
    body = docs_text.section(COMPONENTS, section)
    return docs_text.fenced(body, "python")


def _stand_ins() -> dict[str, object]:
    """What the example assumes the user's own program already has, as real resources."""
    vpc = aws.ec2.Vpc("my-vpc", cidr_block="10.0.0.0/16")
    subnets = [
        aws.ec2.Subnet(f"my-private-{az}", vpc_id=vpc.id, cidr_block=cidr, availability_zone=az)
        for az, cidr in (("us-east-1a", "10.0.0.0/18"), ("us-east-1b", "10.0.64.0/18"))
    ]
    role = aws.iam.Role(
        "my-cluster-role",
        assume_role_policy='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":'
        '{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}',
    )
    cluster = aws.eks.Cluster(
        "my-cluster",
        role_arn=role.arn,
        vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=[s.id for s in subnets]),
    )
    provider = k8s.Provider("my-k8s", kubeconfig="{}")
    return {"my_cluster": cluster, "my_private_subnet_in_one_az": subnets[0], "my_k8s_provider": provider}


def test_the_guide_has_exactly_one_foreign_program_example():
    assert len(readme_python_blocks(SECTION)) == 1


def test_the_foreign_program_example_registers_gpu_nodes_and_device_plugins():
    (code,) = readme_python_blocks(SECTION)

    def program() -> None:
        namespace: dict[str, object] = {"__name__": "__readme__", **_stand_ins()}
        exec(compile(code, "docs/components.md", "exec"), namespace)

    resources = run_component(program)

    node_group = one(resources, "rlinf-eks:index:EfaGpuNodeGroup", "gpu")
    plugins = one(resources, "rlinf-eks:index:DevicePlugins", "device-plugins")
    cluster = one(resources, "aws:eks/cluster:Cluster", "my-cluster")
    nodes = one(resources, "aws:eks/nodeGroup:NodeGroup", "gpu-nodes")
    # the plugins first, the nodes last (as the stacks order them): the node group waits for the
    # plugins' releases (depends_on a component waits for its children)
    releases = [r["urn"] for r in resources if r.get("parent") == plugins["urn"]]
    assert releases and set(releases) <= set(node_group["options"]["dependsOn"]), (releases, node_group["options"]["dependsOn"])
    assert nodes["parent"] == node_group["urn"]
    assert has_inputs(nodes, {"clusterName": cluster["id"], "scalingConfig": {"desiredSize": 4}})
    assert has_inputs(nodes, {"tags": {"team": "robotics"}})
    subnet = one(resources, "aws:ec2/subnet:Subnet", "my-private-us-east-1a")
    assert nodes["inputs"]["subnetIds"] == [subnet["id"]]

    template = one(resources, "aws:ec2/launchTemplate:LaunchTemplate", "gpu-template")
    assert has_inputs(template, {"instanceType": "p5en.48xlarge"})
    interfaces = template["inputs"]["networkInterfaces"]
    assert len(interfaces) == 16  # p5en.48xlarge: one EFA interface per network card
    # every interface: the EFA group and my_cluster.vpc_config.cluster_security_group_id (not None)
    efa_sg = one(resources, "aws:ec2/securityGroup:SecurityGroup", "gpu-efa")["id"]
    for interface in interfaces:
        groups = interface["securityGroups"]
        assert efa_sg in groups and len(groups) == 2
        (cluster_sg,) = [sg for sg in groups if sg != efa_sg]
        assert isinstance(cluster_sg, str) and cluster_sg.startswith("sg-")

    provider = one(resources, "pulumi:providers:kubernetes", "my-k8s")
    releases = resources.of_type("kubernetes:helm.sh/v3:Release")
    assert {r["name"] for r in releases} == {"device-plugins-nvidia", "device-plugins-efa"}
    assert all(r["provider"] == provider["urn"] and r["parent"] == plugins["urn"] for r in releases)


def test_the_example_fails_loudly_when_a_setting_is_misspelt():
    """A user copying the example gets pydantic's error, not a silently ignored key."""
    (code,) = readme_python_blocks(SECTION)
    bad = code.replace("node_count=4", "node_cuont=4")
    assert bad != code

    def program() -> None:
        exec(compile(bad, "docs/components.md", "exec"), {"__name__": "__readme__", **_stand_ins()})

    with pytest.raises(Exception, match="node_cuont"):
        run_component(program)


def test_the_docs_plan_commands_with_set_run(tmp_path, capsys):
    """Every `python -m rlinf_eks plan ... --set ...` command quoted inline in README.md or a guide
    plans."""
    import shlex

    from rlinf_eks.__main__ import main

    text = "".join(path.read_text() for path in docs_text.documents())
    commands = re.findall(r"`python -m rlinf_eks (plan [^`]*--set[^`]*)`", text)
    commands = [c for c in commands if "KEY=VALUE" not in c]
    assert commands, "the docs show no concrete --set command"
    for command in commands:
        argv = shlex.split(command)
        assert main([*argv, "--quiet", "--out", str(tmp_path)]) == 0, (command, capsys.readouterr().err)


def readme_test_command() -> str:
    """The Quick start's second command: set up and run the tests."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 2, lines
    return lines[1]


def test_ci_runs_exactly_the_readmes_test_command():
    command = readme_test_command()
    assert "-m pytest " in command
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == command, ".ci/run's last command is not the README's (Quick start, second line)"


# --- Training image, Before you deploy ----------------------------------------------------------------

IMAGES = docs_text.DOCS / "training-images-and-recipes.md"
IMAGE_POINTER = "(docs/training-images-and-recipes.md)"


def readme_section(heading: str, path: Path = IMAGES) -> str:
    return docs_text.section(path, heading)


def test_the_training_image_section_names_real_dockerfiles_build_args_and_commands():
    import dockerfile

    from rlinf_eks.workload.image_contract import DOCKERFILES

    body = readme_section("## Training image")
    named = set(re.findall(r"images/[a-z-]+/Dockerfile", body))
    assert named == set(DOCKERFILES.values()), named
    for path in named:
        args = {c.value[0].split("=", 1)[0] for c in dockerfile.parse_file(str(ROOT / path)) if c.cmd == "ARG"}
        for command in re.findall(rf"docker build -f {re.escape(path)}[^\n&]*", body):
            for arg in re.findall(r"--build-arg ([A-Z_]+)=", command):
                assert arg in args, f"{command}: {path} has no ARG {arg}"
            assert command.split()[-1] == path.rsplit("/", 1)[0], "the build context is the Dockerfile's folder"
        for arg in re.findall(r"--build-arg ([A-Z_]+)=", body):
            assert any(arg in {c.value[0].split("=", 1)[0] for c in dockerfile.parse_file(str(ROOT / p)) if c.cmd == "ARG"} for p in named), arg
    assert "python -m rlinf_eks image-contract" in body


def test_the_placeholder_message_for_the_image_points_at_the_training_image_section():
    from rlinf_eks.placeholders import _what_to_set

    assert IMAGE_POINTER in _what_to_set("workload.image")
    readme_section("## Training image")
    for stack_file in (ROOT / "stacks" / f"Pulumi.{stack}.yaml" for stack in ALL_STACKS):
        images = [line for line in stack_file.read_text().splitlines() if "image:" in line and "PLACEHOLDER" in line]
        if not images:  # a platform stack has no run, so no image
            assert "role: platform" in stack_file.read_text(), f"{stack_file.name} has no placeholder image line"
            continue
        image_line = images[0]
        assert IMAGE_POINTER in image_line, stack_file.name


def test_before_you_deploy_quotes_what_the_plan_prints_and_writes(tmp_path, cli_python):
    import subprocess

    from rlinf_eks import quotas
    from rlinf_eks.offline.deployer.deployer_policy import POLICY_FILE

    body = readme_section("## Before you deploy", docs_text.DOCS / "deploying.md")
    for code in re.findall(r"L-[0-9A-F]{8}", body):
        assert code in {c for _, c in quotas.QUOTAS.values()}, code
    for name, code in quotas.QUOTAS.values():
        if code in body and f"{name} (" in body:
            assert f"{name} ({code})" in body
    # the deployer policy's first part is where `plan single-node` writes it (a stack that creates a
    # cluster needs more than one managed policy)
    part = POLICY_FILE.replace(".json", "-1.json")
    assert f"file://build/single-node/{part}" in body
    done = subprocess.run(
        [cli_python, "-m", "rlinf_eks", "plan", "single-node", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / POLICY_FILE).is_file() and (tmp_path / part).is_file()
    cost = next(line.strip() for line in done.stdout.splitlines() if line.strip().startswith("stack cost"))
    quoted = re.search(r"`(stack cost [^`]*)`", body).group(1)
    assert cost.startswith(quoted), f"README quotes {quoted!r}, the plan prints {cost!r}"
    multi = subprocess.run(
        [cli_python, "-m", "rlinf_eks", "plan", "multi-node", "--out", str(tmp_path / "multi")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    example = re.search(r"`(Running On-Demand P instances \(L-417A185B\)[^`]*)`", body).group(1)
    assert example in multi.stdout
