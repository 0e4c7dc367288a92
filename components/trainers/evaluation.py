"""``workload.mode: eval``: the dialect's upstream evaluation of one checkpoint of the run.

The training launch of the stack is turned into an evaluation launch by the dialect's recipe
(``evaluation`` in ``recipes/<dialect>.yaml``): the entry point (RLinf's
``evaluations/eval_embodied_agent.py``; veRL's own ``main_ppo`` with ``trainer.val_only``), the
keys that take the checkpoint, and the keys that take the evaluation's directory. The checkpoint
is chosen when the pod starts, as resume chooses it: the newest ``global_step_<N>`` holding the
launcher's completeness marker (or the one ``workload.eval.checkpoint`` names), found with the
training run's own patterns, read only; for a dialect that cannot resume, of the newest attempt
(``attempt-<K>``) that has one. Everything the trainer writes goes to
``<run dir>/eval/step-<N>/`` (its log directory, its checkpoint directory, its videos): the
overrides that pointed at the training run's log or checkpoint directory are dropped, and the
trainer's saving is turned off. The evaluated model is the trained one: where the evaluation
builds it from a section of its own (RLinf's ``rollout.model``), that section becomes the trained
one's (``startup.evaluation.model`` of the recipe); files the evaluation loads from its copy of a
checkpoint that a checkpoint lacks come from the model the run trained from
(``startup.evaluation.modelFiles``). After the trainer ends, ``eval.json`` there summarises the run
(checkpoint, exit status, the last value of each metric the trainer logged, the videos).

    from rlinf_eks.trainers.evaluation import evaluation_launch
    launch = evaluation_launch(settings, training_launch, run_dir="/fsx/stack")
    launch.script()   # sh: pick the checkpoint, run the evaluation, write eval.json
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..config import ConfigError, StackSettings
from ..config.errors import problem_line
from .base import ATTEMPT_PREFIX, COMPLETE_MARKER, TrainerLaunch
from .inputs import config_recipe, input_paths
from .recipe import EvalRecipe, recipe_of
from .startup import EvalModel

__all__ = ["EVAL_DIR_NAME", "MODEL_FILE_MISSING", "NO_CHECKPOINT", "EvalLaunch", "eval_problems", "evaluation_launch"]

EVAL_DIR_NAME = "eval"
"""``<run dir>/eval/step-<N>/`` (``attempt-<K>-step-<N>`` for a checkpoint of a verl-ppo attempt):
not ``global_step_<N>``, which the checkpoint sync would take for an incomplete checkpoint and
never upload."""
NO_CHECKPOINT = 95
"""The evaluation's status when the run has no complete checkpoint (or not the one named):
rlinf_eks.workload.exit_codes.NO_CHECKPOINT, as are the two below (a test keeps them equal;
trainers sit below workload)."""
MODEL_FILE_MISSING = 97
"""rlinf_eks.workload.exit_codes.MODEL_FILE_MISSING: the checkpoint and the model the run trained
from both lack a file the evaluation loads (veRL's preprocessor_config.json)."""
SUMMARY_FILE = "eval.json"
RUN_MISMATCH = 94
"""rlinf_eks.workload.exit_codes.RUN_MISMATCH (a test keeps them equal; trainers sit below workload)."""
_SHELL_GLOB = re.compile(r"[A-Za-z0-9_./*\[\]+-]+")


@dataclass(frozen=True)
class EvalLaunch(TrainerLaunch):
    """A TrainerLaunch whose script evaluates a checkpoint instead of training.

    ``checkpoint_globs``: shell globs of the training run's ``global_step_<N>`` directories (read
    only); ``named``: workload.eval.checkpoint (a name or an absolute path), empty for the newest;
    ``eval_root``: ``<run dir>/eval``; ``runtime_keys``: Hydra keys and what they take at run
    time (``{checkpoint}``, ``{eval_dir}``); ``videos``: where the trainer leaves its videos,
    relative to ``workdir`` (moved into the evaluation directory), empty when they go there."""

    checkpoint_globs: tuple[str, ...] = ()
    named: str = ""
    eval_root: str = ""
    runtime_keys: tuple[tuple[str, str], ...] = ()
    videos: str = ""
    copy_checkpoint: bool = False
    """Evaluate a copy in ``<eval dir>/model/global_step_<N>`` (removed afterwards); ``prepare``
    then runs after the copy, with ``${model}`` the copy."""
    model_files: tuple[tuple[str, str, bool], ...] = ()
    """(folder, file, required): a file the evaluation loads from the copy that a checkpoint lacks,
    copied into it from that folder (the model the run trained from) when the checkpoint has none;
    one not required is copied when the folder has it."""
    run_dir: str = ""
    identity: str = ""
    """The run identity (rlinf_eks.workload.run.run_identity): a run directory recorded for
    another identity is not evaluated (its checkpoints are another model's)."""

    def script(self) -> str:
        globs = " ".join(self.checkpoint_globs)
        args = " ".join(
            shlex.quote(f"{key}=") + '"' + value.replace("{checkpoint}", "${model}").replace("{eval_dir}", "${EVAL_DIR}") + '"'
            for key, value in self.runtime_keys
        )
        lines = [f"cd {shlex.quote(self.workdir)} || exit"]
        if not self.copy_checkpoint:
            lines += [f"{command} || exit" for command in self.prepare]
        if self.identity:
            recorded = shlex.quote(f"{self.run_dir.rstrip('/')}/.rlinf-eks/run-identity")
            lines += [
                f'if [ -f {recorded} ] && [ "$(cat {recorded})" != {shlex.quote(self.identity)} ]; then',
                f'  echo "rlinf-eks: FAILED: the run directory {self.run_dir} holds the checkpoints of another run ($(cat {recorded})), and this'
                f' evaluation is of {self.identity}: put back what changed, or set workload.runName to the run to evaluate (exit {RUN_MISMATCH})" >&2',
                f"  exit {RUN_MISMATCH}",
                "fi",
            ]
        lines += [
            f"named={shlex.quote(self.named)}",
            'case "$named" in',
            '  /*) ckpt="${named%/}"; [ -d "$ckpt" ] || ckpt="" ;;',
            # newest by attempt (a dialect that cannot resume writes each below attempt-<K>), then by
            # step number, among the complete ones (named: that step of the newest attempt holding it)
            f"  *) ckpt=$(for d in {globs}; do [ -f \"$d/{COMPLETE_MARKER}\" ] && echo \"$d\"; done"
            ' | awk -F\'global_step_\' -v want="$named" \'want == "" || "global_step_" $NF == want'
            ' {a = 0; if (match($0, /\\/attempt-[0-9]+\\//)) a = substr($0, RSTART + 9, RLENGTH - 10); print a "\\t" $NF "\\t" $0}\''
            " | sort -k1,1n -k2,2n | tail -n 1 | cut -f3-) ;;",
            "esac",
            'if [ -z "$ckpt" ]; then',
            f'  echo "rlinf-eks: FAILED: no complete checkpoint${{named:+ named $named}} to evaluate ({globs}): train first, or name one'
            f' with workload.eval.checkpoint (exit {NO_CHECKPOINT})" >&2',
            f"  exit {NO_CHECKPOINT}",
            "fi",
            'step="${ckpt##*global_step_}"',
            # a verl-ppo attempt's step N is not an earlier attempt's: each has its own folder
            'attempt=""',
            'case "$ckpt" in */attempt-[0-9]*/*) attempt="${ckpt##*/attempt-}"; attempt="attempt-${attempt%%/*}-" ;; esac',
            f'EVAL_DIR={shlex.quote(self.eval_root)}/"$attempt"step-"$step"',
            'mkdir -p "$EVAL_DIR" || exit',
            'echo "rlinf-eks: evaluating $ckpt into $EVAL_DIR"',
            'model="$ckpt"',
        ]
        if self.copy_checkpoint:
            # the trainer writes into the folder it loads: a copy, named so that the S3 sync (which
            # uploads no unmarked global_step_N) never uploads it, removed when the trainer ends
            lines += [
                'model="$EVAL_DIR/model/global_step_$step"',
                'rm -rf "$EVAL_DIR/model" && mkdir -p "$model" && cp -R "$ckpt/." "$model/" || exit',
                f'rm -f "$model/{COMPLETE_MARKER}"',
            ]
            for folder, name, required in self.model_files:
                source = shlex.quote(f"{folder.rstrip('/')}/{name}")
                if not required:
                    lines.append(f'if [ ! -f "$model/{name}" ] && [ -f {source} ]; then cp {source} "$model/{name}" || exit; fi')
                    continue
                lines += [
                    f'if [ ! -f "$model/{name}" ] && [ -f {source} ]; then cp {source} "$model/{name}" || exit; fi',
                    f'if [ ! -f "$model/{name}" ]; then',
                    f'  echo "rlinf-eks: FAILED: the checkpoint $ckpt has no {name}, which the evaluation loads from it, and the model'
                    f' the run trained from has none to copy ({source}): add it to the model input, or to the checkpoint (exit {MODEL_FILE_MISSING})" >&2',
                    f"  exit {MODEL_FILE_MISSING}",
                    "fi",
                ]
            lines += [f"{command} || exit" for command in self.prepare]
        lines.append(f"set -- {args}")
        if "${" in self.shell():
            # a Hydra interpolation the trainer resolves (the evaluated model's section), not the shell
            lines.append("# shellcheck disable=SC2016 # ${...} is Hydra's interpolation, for the trainer")
        lines += [
            # not exec: the summary is written after the trainer ends; signals reach the trainer
            f'{self.shell()} "$@" &',
            "child=$!",
            "trap 'kill -TERM \"$child\" 2>/dev/null' TERM INT",
            'wait "$child"; status=$?',
            'if [ "$status" -gt 128 ]; then wait "$child"; status=$?; fi',
        ]
        if self.videos:
            source = shlex.quote(self.videos)
            lines += [
                f"if [ -d {source} ]; then",
                '  mkdir -p "$EVAL_DIR/videos" && find ' + source + ' -maxdepth 1 -name "*.mp4" -exec mv -f {} "$EVAL_DIR/videos/" ";"',
                "fi",
            ]
        if self.copy_checkpoint:
            lines.append('rm -rf "$EVAL_DIR/model"')
        lines += [
            'python3 - "$EVAL_DIR" "$ckpt" "$status" <<\'PY\' || echo "rlinf-eks: could not write $EVAL_DIR/eval.json" >&2',
            SUMMARY_PROGRAM.rstrip("\n"),
            "PY",
            'exit "$status"',
            "",
        ]
        return "\n".join(lines)


# Runs in the pod with the image's python3; reads what the trainers write (veRL's LocalLogger
# lines, RLinf's TensorBoard events with the tensorboard package torch's SummaryWriter needs).
SUMMARY_PROGRAM = """\
import glob, json, os, sys
out, ckpt, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
metrics, note = {}, ""
for path in sorted(glob.glob(os.path.join(out, "run_*.log"))):
    for line in open(path, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\\n").split("\\t", 2)
        if line.startswith("#") or len(parts) != 3:
            continue
        try:
            data = json.loads(parts[2])
        except ValueError:
            continue
        metrics.update({k: v for k, v in data.items() if isinstance(v, (int, float))})
if glob.glob(os.path.join(out, "tensorboard", "**", "events.out.tfevents.*"), recursive=True):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        for folder in sorted({os.path.dirname(p) for p in glob.glob(os.path.join(out, "tensorboard", "**", "events.out.tfevents.*"), recursive=True)}):
            acc = EventAccumulator(folder, size_guidance={"scalars": 0})
            acc.Reload()
            for tag in acc.Tags().get("scalars", []):
                metrics[tag] = acc.Scalars(tag)[-1].value
    except ImportError:
        note = "tensorboard is not installed in the image: read the events with python -m rlinf_eks report"
videos = sorted(os.path.relpath(p, out) for p in glob.glob(os.path.join(out, "**", "*.mp4"), recursive=True))
step = int(os.path.basename(ckpt.rstrip("/")).rsplit("global_step_", 1)[-1])
summary = {"checkpoint": ckpt, "step": step, "status": status, "metrics": metrics, "videos": videos}
if note:
    summary["note"] = note
with open(os.path.join(out, "eval.json.tmp"), "w") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
os.replace(os.path.join(out, "eval.json.tmp"), os.path.join(out, "eval.json"))
print("rlinf-eks: evaluation summary in " + os.path.join(out, "eval.json"), file=sys.stderr)
"""


def eval_problems(settings: StackSettings, stack: object = None) -> list[str]:
    """workload.mode eval on a dialect whose upstream has no evaluation: one problem line."""
    workload = settings.workload
    if not workload.enabled or workload.mode != "eval":
        return []
    recipe = recipe_of(workload.trainer.dialect).evaluation
    if recipe.unsupported:
        return [problem_line("workload.mode", "eval", f"the {workload.trainer.dialect} dialect: {recipe.unsupported}")]
    return []


def _key(item: str) -> str:
    return item.lstrip("~+").split("=", 1)[0]


def _last_value(argv: list[str], key: str) -> str:
    """The value the command line gives ``key`` (its last override), empty for none."""
    values = [item.split("=", 1)[1] for item in argv if "=" in item and _key(item) == key]
    return values[-1] if values else ""


def _evaluated_model(argv: list[str], model: EvalModel) -> tuple[list[str], list[str]]:
    """The evaluated model's section becomes the trained one's (``section=${source}``, appended
    last, one copy); the overrides of ``section.<keep>`` (what the training's rollout read from
    ``section`` itself) go to ``source.<keep>``, the others of ``section`` are dropped (the
    training's rollout never read them; a key below an interpolation cannot be set). Returns the
    command line and the dropped overrides."""
    prefix = model.section + "."
    kept, dropped = [], []
    for item in argv:
        key = _key(item)
        if not key.startswith(prefix):
            kept.append(item)
        elif key[len(prefix):].split(".", 1)[0] in model.keep:
            sign = item[: len(item) - len(item.lstrip("~+"))]
            kept.append(sign + model.source + "." + item[len(sign) + len(prefix):])
        else:
            dropped.append(item)
    return [*kept, f"{model.section}=${{{model.source}}}"], dropped


def evaluation_launch(
    settings: StackSettings, training: TrainerLaunch, *, run_dir: str, experiment: str, identity: str = "", inputs_root: str = ""
) -> EvalLaunch:
    """The evaluation of a checkpoint of the run whose training launch is ``training``, writing
    into ``<run_dir>/eval/step-<N>``; ``identity``: the run's (checked against the one the run
    directory records, when given). Raises ConfigError for a dialect without evaluation."""
    problems = eval_problems(settings)
    if problems:
        raise ConfigError(problems)
    recipe: EvalRecipe = recipe_of(settings.workload.trainer.dialect).evaluation
    # the launcher's marker patterns (Python globs, glob.escape'd) read as shell globs: the same
    # bracket syntax; a path a shell would split is refused rather than mis-globbed
    unsafe = [p for p in training.checkpoint_patterns if not _SHELL_GLOB.fullmatch(p)]
    if unsafe:
        raise ConfigError([problem_line("workload.mode", "eval", f"checkpoint path {unsafe[0]!r} has characters a shell glob cannot hold")])
    # a dialect that cannot resume writes each attempt below attempt-<K>; a run trained before
    # attempts were kept apart wrote beside them (read as attempt 0, older than any attempt)
    globs = training.checkpoint_patterns + tuple(p.replace(f"/{ATTEMPT_PREFIX}*/", "/") for p in training.checkpoint_patterns if f"/{ATTEMPT_PREFIX}*/" in p)
    checkpoint = f"{{checkpoint}}/{recipe.checkpoint_file}" if recipe.checkpoint_file else "{checkpoint}"
    runtime = [(key, checkpoint) for key in recipe.checkpoint_keys]
    runtime += [(key, "{eval_dir}") for key in recipe.dir_keys]
    runtime += [(key, f"{{eval_dir}}/{recipe.videos}") for key in recipe.video_keys]
    replaced = {key for key, _ in runtime} | set(recipe.settings)
    argv = list(training.argv)
    if recipe.script:
        argv[1] = recipe.script
    # the user's overrides stay, except where they would point the evaluation back at the training
    # run's directories or turn saving on again
    argv = [item for item in argv if _key(item) not in replaced]
    loads = recipe_of(settings.workload.trainer.dialect).startup.evaluation
    warnings = list(training.warnings)
    if loads.model is not None:
        argv, dropped = _evaluated_model(argv, loads.model)
        warnings += [
            f"workload.mode=eval: {item!r} is not passed to the evaluation: its model is {loads.model.section}=${{{loads.model.source}}}, "
            f"the trained model's section, and the trained rollout read only {', '.join(loads.model.keep)} of {loads.model.section}"
            for item in dropped
        ]
    argv += [f"{key}={value}" for key, value in recipe.settings.items()]
    videos = "" if recipe.video_keys else recipe.videos.replace("{experiment}", experiment)
    named = settings.workload.eval.checkpoint or ""
    prepare = training.prepare
    model_files: tuple[tuple[str, str, bool], ...] = ()
    trained_from = _last_value(training.argv, recipe_of(settings.workload.trainer.dialect).model_keys[0])
    if recipe.copy_checkpoint and trained_from:
        model_files = tuple((trained_from, name, required) for name, required in loads.model_files)
    config = config_recipe(settings)
    if recipe.copy_checkpoint and config is not None:
        # the config's steps on the copy the trainer loads ({model}); other inputs where staged
        paths = {name: shlex.quote(path) for name, path in input_paths(settings, inputs_root).items()}
        prepare = tuple(command.format(**{**paths, "model": '"${model}"'}) for command in config.prepare)
    return EvalLaunch(
        argv=argv,
        env=dict(training.env),
        workdir=training.workdir,
        warnings=warnings,
        resume=None,
        checkpoint_patterns=(),
        resume_note="",
        prepare=prepare,
        node_rank_env=training.node_rank_env,
        checkpoint_globs=globs,
        named=named,
        eval_root=f"{run_dir.rstrip('/')}/{EVAL_DIR_NAME}",
        runtime_keys=tuple(runtime),
        videos=videos,
        copy_checkpoint=recipe.copy_checkpoint,
        model_files=model_files,
        run_dir=run_dir,
        identity=identity,
    )
