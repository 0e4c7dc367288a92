"""One grammar and one output check for every command, and messages in the project's words
(issue 45, items 4-8; issue 44, item 5): each bad input is what a user types, and what they read
is one line (a config problem: one line per problem) naming the key or flag, the value as written
and what is valid, exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlinf_eks.__main__ import main
from tests import report_logs

# every command that reads a stack, with the arguments it needs besides the stack's
STACK_COMMANDS = {
    "plan": ["--quiet"],
    "image-contract": [],
    "verify": ["--dry-run"],
    "report": ["--run-dir", "."],
    "build-image": [],
}


def _stderr(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return captured.err.strip().splitlines()


# --- one output folder check ---------------------------------------------------------------------

OUT_COMMANDS = {
    "plan": ["plan", "single-node", "--quiet"],
    "verify --dry-run": ["verify", "vllm-rollout", "--dry-run"],
    "report": ["report", "single-node", "--run-dir", "RUN"],
}


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
@pytest.mark.parametrize("bad", ["a file", "under a file", "/proc/nope", "/proc/nope/deeper"])
def test_every_command_refuses_an_out_it_cannot_write_in_one_line(command, bad, tmp_path, capsys):
    file = tmp_path / "file.txt"
    file.write_text("not a folder")
    out = {"a file": file, "under a file": file / "sub", "/proc/nope": Path("/proc/nope"), "/proc/nope/deeper": Path("/proc/nope/deeper")}[bad]
    run = report_logs.verl_run(tmp_path / "run")
    argv = [str(run) if arg == "RUN" else arg for arg in OUT_COMMANDS[command]]
    assert main([*argv, "--out", str(out)]) == 2
    (line,) = _stderr(capsys)
    assert line.startswith("error: ") and "--out: " in line and str(out if bad != "under a file" else file) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "run"]  # nothing created


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
def test_every_command_refuses_a_folder_of_other_files_and_an_empty_out(command, tmp_path, capsys):
    """`--out .` in the repository, `--out ~` or `--out /` would scatter the command's files among
    the user's (and replace one of the same name): a folder that holds files must be one the command
    wrote. An empty --out is no folder at all."""
    run = report_logs.verl_run(tmp_path / "run")
    argv = [str(run) if arg == "RUN" else arg for arg in OUT_COMMANDS[command]]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("the user's")
    (mine / "plan.json.txt").write_text("not a plan")
    assert main([*argv, "--out", str(mine)]) == 2
    (line,) = _stderr(capsys)
    name = command.split()[0]
    assert line == (f"error: {f'report {argv[1]}: ' if name == 'report' else ''}--out: {mine} holds files that "
                    f"{name} did not write (notes.md, plan.json.txt): give a new or empty folder, or one {name} wrote before"), line
    assert sorted(p.name for p in mine.iterdir()) == ["notes.md", "plan.json.txt"]  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "run"]  # nothing created beside it
    assert _refused([*argv, "--out", ""], capsys) == f"error: {name} --out: '' is an empty path: give a folder, or leave --out out for the default"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*argv, "--out", str(empty)]) == 0  # an empty folder is fine
    capsys.readouterr()
    assert main([*argv, "--out", str(empty)]) == 0  # and so is the folder it wrote


def test_a_dry_run_never_writes_into_a_plans_folder(tmp_path, capsys):
    """Both hold manifests/: a dry run's objects there would mix with the plan's, the folder tools
    read as the plan's public contract, and replace any of the same name."""
    plan = tmp_path / "plan"
    assert main(["plan", "vllm-rollout", "--quiet", "--out", str(plan)]) == 0
    before = sorted((plan / "manifests").iterdir())
    capsys.readouterr()
    assert main(["verify", "vllm-rollout", "--dry-run", "--out", str(plan)]) == 2
    assert _stderr(capsys) == [f"error: --out: {plan} is a plan's folder (plan.json): give verify a folder of its own"]
    assert sorted((plan / "manifests").iterdir()) == before


def test_a_report_in_its_default_folder_leaves_the_plans_default_folder_plannable(tmp_path, monkeypatch, capsys):
    """report's default folder is build/<stack>/report, inside plan's build/<stack>: a report made
    before the first plan must not make that folder one of "files plan did not write"."""
    import shutil

    from tests.harness import ROOT

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", project / "stacks")
    monkeypatch.chdir(project)
    run = report_logs.verl_run(tmp_path / "run")
    assert main(["report", "single-node", "--run-dir", str(run)]) == 0
    assert main(["plan", "single-node", "--quiet"]) == 0, _stderr(capsys)
    assert {"plan.json", "report"} <= {p.name for p in (project / "build" / "single-node").iterdir()}


@pytest.mark.parametrize("bad", ["a folder", "under a file", "/proc/nope/verify.json"])
def test_verify_refuses_a_json_file_it_cannot_write_before_climbing(bad, tmp_path, capsys):
    file = tmp_path / "file.txt"
    file.write_text("not a folder")
    json_file = {"a folder": tmp_path, "under a file": file / "verify.json", "/proc/nope/verify.json": Path("/proc/nope/verify.json")}[bad]
    assert main(["verify", "vllm-rollout", "--json", str(json_file)]) == 2
    (line,) = _stderr(capsys)
    assert line.startswith(f"error: --json {json_file}: ")


def test_verify_out_without_dry_run_says_what_out_is_for(capsys):
    assert main(["verify", "vllm-rollout", "--out", "build/x"]) == 2
    assert _stderr(capsys) == ["error: --out is the folder of --dry-run's manifests: add --dry-run, or leave --out out"]


# --- one grammar ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(STACK_COMMANDS))
@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (["--unset", "gpuNodes.nodecount"], "--unset 'gpuNodes.nodecount': unknown key (did you mean nodeCount?)"),
        (["--set", "gpuNodes.nodecount=2"], "gpuNodes.nodecount: unknown key (did you mean nodeCount?)"),
        (["--unset", "gpuNoodes"], "--unset 'gpuNoodes': unknown key (did you mean gpuNodes?)"),
        (["--unset", "workload.rollout.bakend"], "--unset 'workload.rollout.bakend': unknown key (did you mean backend?)"),
        (["--set", "gpuNodes.capacityBlock.startTim=x"], "gpuNodes.capacityBlock.startTim: unknown key (did you mean startTime?)"),
        (["--set", "gpuNodes.count=2"], "gpuNodes.count: unknown key (did you mean nodeCount?)"),  # the one key it ends
        (["--unset", "gpuNodes.count"], "--unset 'gpuNodes.count': unknown key (did you mean nodeCount?)"),
    ],
)
def test_every_stack_command_takes_set_and_unset_and_names_a_typo(command, edit, said, capsys):
    assert main([command, "vllm-rollout", *STACK_COMMANDS[command], *edit]) == 2
    assert said in "\n".join(_stderr(capsys))


@pytest.mark.parametrize(
    ("key", "held"),
    [
        ("gpuNodes.nodeCount.x", "gpuNodes.nodeCount"),
        ("workload.image.tag", "workload.image"),
        ("workload.env.NCCL_DEBUG.level", "workload.env.NCCL_DEBUG"),  # a free mapping's value is a plain value too
        ("cluster.adminRoleArns[0].arn", "cluster.adminRoleArns[0]"),
    ],
)
def test_unset_of_a_key_below_a_plain_value_is_refused_naming_the_value(key, held, tmp_path, capsys):
    assert main(["plan", "vllm-rollout", "--quiet", "--out", str(tmp_path / "out"), "--unset", key]) == 2
    said = f"--unset {key!r}: {held} is a plain value, not an object: it has no key {key.rsplit('.', 1)[1]!r}; unset {held} itself"
    assert said in "\n".join(_stderr(capsys))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(STACK_COMMANDS))
def test_unset_of_a_free_key_or_an_unset_setting_is_no_error(command, tmp_path, capsys):
    # workload.env holds any variable; gpuNodes.maxNodes is a setting the stack leaves at its default
    argv = [command, "vllm-rollout", *STACK_COMMANDS[command], "--unset", "workload.env.NEVER_SET", "--unset", "gpuNodes.maxNodes"]
    if command in ("plan", "verify", "report"):
        argv += ["--out", str(tmp_path / "out")]
    main(argv)
    assert "unknown key" not in "\n".join(_stderr(capsys))


@pytest.mark.parametrize("command", sorted(STACK_COMMANDS))
@pytest.mark.parametrize(("stack", "meant"), [("multinode", "multi-node"), ("single_node", "single-node"), ("vllm-rolout", "vllm-rollout")])
def test_every_stack_command_suggests_the_stack_meant(command, stack, meant, capsys):
    assert main([command, stack, *STACK_COMMANDS[command]]) == 2
    (line,) = _stderr(capsys)
    assert f"unknown stack {stack!r} (did you mean {meant}?)" in line


def test_a_stack_file_that_is_a_folder_is_named_so_and_is_no_stack(tmp_path, monkeypatch, capsys):
    import shutil

    from tests.harness import ROOT

    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    (tmp_path / "stacks" / "Pulumi.mine.yaml").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "mine"]) == 2
    assert _stderr(capsys) == ["error: stack mine: stacks/Pulumi.mine.yaml is a folder, not a stack file"]
    assert main(["plan", "mne"]) == 2
    (line,) = _stderr(capsys)
    assert "did you mean" not in line and "mine" not in line.split("(stacks: ")[1]  # no folder among the stacks


@pytest.mark.parametrize("command", sorted(STACK_COMMANDS))
def test_platform_on_a_stack_that_is_not_an_experiment_is_refused_even_when_the_folder_holds_a_plan(command, tmp_path, capsys):
    platform = tmp_path / "platform"
    platform.mkdir()
    (platform / "plan.json").write_text(json.dumps({"project": "rlinf-eks", "stack": "platform", "resources": [], "outputs": {}}))
    assert main([command, "vllm-rollout", *STACK_COMMANDS[command], "--platform", str(platform)]) == 2
    (line,) = _stderr(capsys)
    assert f"--platform {platform}: stack vllm-rollout is not an experiment (platform.role: both)" in line and "leave it out" in line


ARGPARSE_WORDS = ("unrecognized arguments", "invalid choice", "the following arguments are required", "expected one argument")


def _refused(argv: list[str], capsys) -> str:
    """The one line a command line argparse itself refuses gets, after exit 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    (line,) = _stderr(capsys)
    assert line.startswith("error: ") and not any(words in line for words in ARGPARSE_WORDS), line
    return line


@pytest.mark.parametrize("command", sorted([*STACK_COMMANDS, "diff"]))
def test_argparses_own_errors_are_one_line_on_every_command(command, capsys):
    stack = ["a", "b"] if command == "diff" else ["vllm-rollout"]
    assert _refused([command, *stack, "--nope"], capsys).startswith(f"error: {command} --nope: no such flag; {command} takes ")
    assert "(did you mean --unset?)" in _refused([command, *stack, "--unsett", "x"], capsys) or command == "diff"
    # the misspelt flag is named even where it leaves the stack out, before argparse's missing argument
    assert "--sett: no such flag (did you mean --set?)" in _refused([command, "--sett", "a=b"], capsys) or command == "diff"
    if command in ("plan", "image-contract"):
        return  # their STACK defaults to single-node
    line = _refused([command], capsys)
    missing = "BASE and NEW missing: BASE: the base plan" if command == "diff" else "STACK missing: "
    assert line.startswith(f"error: {command} {missing}"), line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["diff", "--format", "html", "a", "b"], "error: diff --format 'html': not a choice; valid: text, markdown"),
        (["diff", "--format", "markdwn", "a", "b"], "error: diff --format 'markdwn': not a choice (did you mean markdown?); valid: text, markdown"),
        (["verify", "vllm-rollout", "--level", "9"], "error: verify --level 9: not a choice; valid: 0, 1, 2, 3, 4, 5"),
        (["verify", "vllm-rollout", "--level", "all"], "error: verify --level 'all': must be an integer; valid: 0, 1, 2, 3, 4, 5"),
        (["plan", "vllm-rollout", "--out"], "error: plan --out: needs a value (DIR)"),
        (["plan", "--sett", "gpuNodes.nodeCount=2"], "error: plan --sett: no such flag (did you mean --set?); plan takes "),
        (["plan", "vllm-rollout", "--s", "x"], "error: plan --s: ambiguous, it could be --set or --strict: spell it out"),
        (["report", "x", "--run-dir", "r", "--from-bucket"], "error: report --from-bucket: not allowed with --run-dir"),
        (["build-image", "vllm-rollout", "extra"], "error: build-image: unexpected argument 'extra'; usage: python -m rlinf_eks build-image "),
        (["plann"], "error: 'plann': no such command (did you mean plan?); commands: plan, diff, image-contract, verify, report"),
        ([], "error: no command given; commands: plan, diff, image-contract, verify, report, build-image"),
        (["--sett", "x"], "error: --sett: no such flag; python -m rlinf_eks takes --help, then a command: plan, diff"),
    ],
)
def test_argparses_own_errors_name_the_flag_the_value_and_what_is_valid(argv, said, capsys):
    assert _refused(argv, capsys).startswith(said)


def test_no_command_help_shows_markup(capsys):
    for argv in (["--help"], *([command, "--help"] for command in [*STACK_COMMANDS, "diff"])):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        assert "``" not in text and ":mod:" not in text, argv


# --- messages in the project's words -------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "said"),
    [
        ("gpuNodes.nodeCount=9999", "gpuNodes.nodeCount=9999: must be at most 512"),
        ("gpuNodes.hugepagesGib=-1", "gpuNodes.hugepagesGib=-1: must be at least 0"),
        ("queue.topologyLayer=9", "queue.topologyLayer=9: must be at most 3"),
        ("workload.rollout.gpuMemoryUtilization=abc", "workload.rollout.gpuMemoryUtilization='abc': must be a number"),
        ("gpuNodes.maxNodes=true", "gpuNodes.maxNodes=true: must be an integer, not a boolean"),
        ("workload.rollout.gpuMemoryUtilization=true", "workload.rollout.gpuMemoryUtilization=true: must be a number, not a boolean"),
        ("workload.image=", "workload.image='': must be at least 1 character long"),
        ("gpuNodes.labels=3", "gpuNodes.labels=3: must be an object"),
        ("cluster.adminRoleArns=x", "cluster.adminRoleArns='x': must be a list"),
    ],
)
def test_bounds_and_types_are_said_in_the_projects_words(item, said, tmp_path, capsys):
    assert main(["plan", "vllm-rollout", "--quiet", "--out", str(tmp_path / "o"), "--set", item]) == 2
    text = "\n".join(_stderr(capsys))
    assert said in text
    for python in ("Input should", "Value error", "=None", "=True", "=False", "dictionary"):
        assert python not in text


def test_a_holdout_of_bad_values_never_shows_pydantics_or_pythons_words(tmp_path, capsys):
    bad = [
        "gpuNodes.rootVolumeGib=100000", "gpuNodes.rootVolumeGib=1.5", "workload.rollout.tensorParallelSize=0",
        "workload.progressTimeoutSeconds=-5", "queue.topologyLayer=0", "gpuNodes.efa=maybe", "gpuNodes.scaleToZero=1",
        "workload.rollout.maxNumBatchedTokens=abc", "storage.sharedFilesystem.enabled=yes", "preflight.enabled=null",
        "workload.env=3", "tags=x", "gpuNodes.labels.team=true", "workload.trainer.batch=[]", "network.availabilityZones=x",
    ]  # fmt: skip
    argv = ["plan", "vllm-rollout", "--quiet", "--out", str(tmp_path / "o")]
    for item in bad:
        argv += ["--set", item]
    assert main(argv) == 2
    lines = _stderr(capsys)
    assert len(lines) >= len(bad)
    for line in lines:
        for python in ("Input should", "Value error", "=None", "=True", "=False", "valid dictionary", "<class"):
            assert python not in line, line


# --- diff -----------------------------------------------------------------------------------------


def _plan_file(path: Path, stack: str, interfaces: int) -> Path:
    template = {
        "urn": f"urn:pulumi:{stack}::rlinf-eks::aws:ec2/launchTemplate:LaunchTemplate::gpu-template",
        "type": "aws:ec2/launchTemplate:LaunchTemplate", "name": "gpu-template", "id": "lt-1", "parent": None, "custom": True,
        "provider": None, "options": {},
        "inputs": {"instanceType": "p5.48xlarge" if interfaces == 32 else "p5en.48xlarge",
                   "networkInterfaces": [{"networkCardIndex": i, "interfaceType": "efa-only"} for i in range(interfaces)]},
    }  # fmt: skip
    path.mkdir(parents=True)
    (path / "plan.json").write_text(json.dumps({"project": "rlinf-eks", "stack": stack, "resources": [template], "outputs": {}}))
    return path


def test_diff_for_a_terminal_is_plain_text_and_summarises_a_run_of_removed_items(tmp_path, capsys):
    base, new = _plan_file(tmp_path / "p5", "s", 32), _plan_file(tmp_path / "p5en", "s", 16)
    assert main(["diff", str(base), str(new), "--format", "text"]) == 1
    text = capsys.readouterr().out
    assert text.startswith(f"Offline infrastructure diff: {base} -> {new}\n")
    for markup in ("###", "**", "`", "> [!"):
        assert markup not in text
    assert 'inputs.networkInterfaces[16..31]: 16 items removed (the first: {"interfaceType":"efa-only","networkCardIndex":16})' in text
    assert "networkInterfaces[17]" not in text


def test_diff_for_a_pipe_is_markdown_as_before(tmp_path, capsys):
    base, new = _plan_file(tmp_path / "p5", "s", 32), _plan_file(tmp_path / "p5en", "s", 16)
    assert main(["diff", str(base), str(new)]) == 1  # capsys' stdout is no terminal
    text = capsys.readouterr().out
    assert text.startswith(f"### Offline infrastructure diff: `{base}` → `{new}`\n")
    assert "- `inputs.networkInterfaces[16..31]`: 16 items removed" in text


def test_diff_of_two_stacks_plans_says_so_first(tmp_path, capsys):
    base, new = _plan_file(tmp_path / "a", "single-node", 32), _plan_file(tmp_path / "b", "multi-node", 32)
    assert main(["diff", str(base), str(new), "--format", "text"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == ("Note: these are plans of two different stacks (rlinf-eks/single-node and rlinf-eks/multi-node): URNs carry "
                        "the stack, so every resource differs.")  # fmt: skip


# --- report ---------------------------------------------------------------------------------------


def test_report_of_another_dialects_logs_warns(tmp_path, capsys):
    run = report_logs.rlinf_run(tmp_path / "run")  # RLinf's TensorBoard events; single-node runs verl-ppo
    assert main(["report", "single-node", "--run-dir", str(run), "--out", str(tmp_path / "out")]) == 0
    (line,) = _stderr(capsys)
    assert line.startswith("warning: report single-node: the run directory holds TensorBoard events (RLinf's), but the stack runs verl-ppo")
    assert main(["report", "vllm-rollout", "--run-dir", str(run), "--out", str(tmp_path / "out2")]) == 0
    assert _stderr(capsys) == []
