"""The config check: an init container of every Ray pod, in the training image, after the image
check and before the fabric check, the preflight, the model staging and the Ray join wait. It
composes the trainer's Hydra config from the trainer's own config dir with the rendered overrides
(the run's command line, the evaluation's with its run-time keys), requires the keys the trainer
reads at startup (in eval mode: ``startup.evaluation.reads`` of the dialect's recipe), resolves
every interpolation, and runs the trainer's own validation (``startup.configCheck``: RLinf's
``validate_cfg``, with its component placement answered from the run's GPUs, so that the FSDP
config's validation runs too) as far as it goes without the Ray cluster and the staged model. A config the
trainer would refuse fails the pod in seconds with ``exit_codes.CONFIG_INVALID`` and one line,
written to the container's termination message too, instead of after the cluster formed.

The program is ``programs/config_check.py``; the script ``sh/config-check.sh``."""

from __future__ import annotations

import json
from typing import Any

from ..trainers import DIALECTS, config_name_of, recipe_of
from ..trainers.evaluation import EvalLaunch
from . import exit_codes, scripts
from .env import trainer_pythonpath
from .kube import CONFIG_CHECK_CONTAINER, check_container, core
from .run import Run

CONFIG_CHECK_SCRIPT = "config-check.sh"
CONTAINER = CONFIG_CHECK_CONTAINER
TERMINATION_LOG = "/dev/termination-log"
TIMEOUT_SECONDS = 300
"""Importing RLinf's validation imports torch and its simulators' packages: well under a minute."""

CONFIG_CHECK = scripts.body(CONFIG_CHECK_SCRIPT)


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else ""


def hydra_overrides(argv: list[str]) -> list[str]:
    """The Hydra overrides of a trainer command: after ``--config-name NAME``, else after
    ``python -m MODULE`` or ``python SCRIPT``."""
    if "--config-name" in argv:
        return argv[argv.index("--config-name") + 2 :]
    return argv[3:] if len(argv) > 1 and argv[1] == "-m" else argv[2:]


def check_spec(run: Run, *, termination_log: str = TERMINATION_LOG, checkout: str = "") -> dict[str, Any]:
    """What the program checks for this run, as the JSON it reads; ``checkout``: a directory
    standing for the image's trainer checkout (tests compose against the reference configs)."""
    settings, launch = run.settings, run.launch
    trainer = settings.workload.trainer
    startup = recipe_of(trainer.dialect).startup
    workdir = trainer.workdir.rstrip("/")
    config_dir = _after(launch.argv, "--config-path") or f"{workdir}/{DIALECTS[trainer.dialect].config_dir}"
    if checkout and (config_dir == workdir or config_dir.startswith(workdir + "/")):
        config_dir = checkout.rstrip("/") + config_dir[len(workdir):]
    overrides = hydra_overrides(launch.argv)
    requires: dict[str, str] = {}
    what = f"the {trainer.dialect} trainer's config {config_name_of(trainer)}"
    if isinstance(launch, EvalLaunch):
        # the run-time keys take the chosen checkpoint and the evaluation's folder when the pod
        # starts; any path stands in for them here (the keys are what is checked)
        eval_dir = f"{launch.eval_root}/step-0"
        checkpoint = f"{eval_dir}/model/global_step_0" if launch.copy_checkpoint else f"{launch.eval_root}/global_step_0"
        overrides += [f"{key}={value.replace('{checkpoint}', checkpoint).replace('{eval_dir}', eval_dir)}" for key, value in launch.runtime_keys]
        requires = {key: f"the evaluation ({where})" for key, where in startup.evaluation.reads.items()}
        what = f"the {trainer.dialect} evaluation's config {config_name_of(trainer)}"
    check = startup.config_check
    return {
        "config_dir": config_dir,
        "config_name": config_name_of(trainer),
        "version_base": check.version_base,
        "overrides": overrides,
        "requires": requires,
        "validate": check.validate,
        "stand_ins": dict(check.stand_ins),
        # the GPUs of the Ray cluster the trainer will join: where its placement says "all"
        "gpus": run.nnodes * run.shape.pod.gpus,
        "exit": exit_codes.CONFIG_INVALID,
        "what": what,
        "termination_log": termination_log,
    }


def config_check_script(run: Run, *, termination_log: str = TERMINATION_LOG, timeout_seconds: int = TIMEOUT_SECONDS, checkout: str = "") -> str:
    """``termination_log``: where the failure line goes besides stderr; ``checkout``: a directory
    standing for the image's trainer checkout (both for tests)."""
    spec = check_spec(run, termination_log=termination_log, checkout=checkout)
    return scripts.render(
        {
            "WORKDIR": checkout or run.settings.workload.trainer.workdir,
            "TRAINER_PYTHONPATH": trainer_pythonpath(run.settings, run.launch.env),
            "CHECK": json.dumps(spec, separators=(",", ":")),
            "WHAT": spec["what"],
            "TIMEOUT_SECONDS": timeout_seconds,
            "TERMINATION_LOG": termination_log,
            "EXIT_CONFIG_INVALID": exit_codes.CONFIG_INVALID,
        },
        CONFIG_CHECK,
    )


def config_check_container(image: str, *, env: list[core.EnvVarArgs]) -> core.ContainerArgs:
    """The training image's environment (the trainer's variables: EMBODIED_PATH for RLinf's
    searchpath), no devices: it composes a config and imports the trainer's validation. Its
    termination message is the failure line (else the log's last lines)."""
    return check_container(CONTAINER, image, CONFIG_CHECK_SCRIPT, env=env, termination_message_policy="FallbackToLogsOnError")
