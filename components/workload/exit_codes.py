"""Exit statuses of the training pods' containers that mean something to the restart policy.

One place for them: the launch scripts render them (``shell_values``), the Job's
``podFailurePolicy`` and the plan map them, and the tests assert them. A trainer's own status
(1, 2, a Python traceback's 1, a signal's 128+n) passes through unchanged; these are chosen
outside what Python, bash and Ray use for themselves (1, 2, 126, 127, 128+n) and outside
``sysexits.h`` (64-78).
"""

from __future__ import annotations

STOPPED = 143
"""The pod was stopped (eviction, node drain, Job deletion): 128 + SIGTERM, whatever the trainer
or Ray did when told to stop (the manual launcher's convention)."""

CLUSTER_DID_NOT_FORM = 3
"""The Ray cluster did not form within ``workload.joinTimeoutSeconds`` (head or worker)."""

FABRIC_FAILED = 90
"""The network fabric is not usable: EFA devices or libfabric's efa provider missing, or NCCL
could not load its network plugin (``NCCL_NET`` pinned). A node fault, not a trainer bug: the node
should be replaced, and the run restarted on a healthy one."""

PROGRESS_TIMEOUT = 91
"""The progress watchdog stopped a trainer that wrote no new checkpoint step and no log line for
``workload.progressTimeoutSeconds``: a hang (a collective that never completes, a dead peer). The
trainer was stopped so the GPUs are released; whether to retry is the restart policy's call."""

RESERVATION_ENDING = 92
"""The trainer was stopped (and given the time to checkpoint) because the Capacity Block ends
soon: EC2 terminates the block's instances 30 minutes before its end. Not a failure of the run;
restarting on the same (ending) capacity would be pointless, a later block resumes it."""

IMAGE_BROKEN = 93
"""The training image does not satisfy the image contract (:mod:`.image_contract`): a tool, Ray at
``workload.rayVersion``, the trainer's entry script or config dir, libfabric or aws-ofi-nccl is
missing. Checked by the ``image-check`` init container before anything else runs; a restart cannot
fix an image, so the failure rules do not retry it."""

RUN_MISMATCH = 94
"""The run directory holds the complete checkpoints of another run (another model, dialect or
trainer config, recorded in ``<run dir>/.rlinf-eks/run-identity``): resuming would load weights of
the wrong shape or meaning, and starting over would mix two runs' checkpoints. The head stops at
once; ``workload.runName`` starts a new run beside the old one."""

CONFIG_INVALID = 96
"""The trainer would refuse its config: the ``config-check`` init container (:mod:`.config_check`)
composed it in the training image with the rendered overrides and Hydra, a key the trainer reads
at startup, an interpolation or the trainer's own validation (as far as it runs without the Ray
cluster) failed. Checked before anything is staged or Ray starts; a restart renders the same
command, so the failure rules do not retry it."""

NO_CHECKPOINT = 95
"""workload.mode eval: the run has no complete checkpoint to evaluate (or not the one
``workload.eval.checkpoint`` names). Train first, or name one; a restart finds the same folder."""

MODEL_FILE_MISSING = 97
"""workload.mode eval: a file the dialect's evaluation loads from the evaluated checkpoint (veRL's
``preprocessor_config.json``, which ``AutoProcessor.from_pretrained`` opens) is in neither the
checkpoint nor the model the run trained from, to copy it from. The pod stops before the trainer
starts, which would fail on it (an OSError in transformers) after loading the model; a restart
finds the same files."""

RENDER_FAILED = 98
"""The simulator cannot render on this node with this image: the ``render-check`` init container
(:mod:`.render_check`) rendered no frame with the trainer's renderer (SAPIEN's Vulkan for ManiSkill,
MuJoCo with MUJOCO_GL for LIBERO), or imageio could not write it as the trainer writes its videos.
Checked before anything is staged or Ray starts. A driver without the graphics libraries is a node
fault as often as an image's: the restart policy counts it as any other failure."""

ALL = {
    "STOPPED": STOPPED,
    "CLUSTER_DID_NOT_FORM": CLUSTER_DID_NOT_FORM,
    "FABRIC_FAILED": FABRIC_FAILED,
    "PROGRESS_TIMEOUT": PROGRESS_TIMEOUT,
    "RESERVATION_ENDING": RESERVATION_ENDING,
    "IMAGE_BROKEN": IMAGE_BROKEN,
    "RUN_MISMATCH": RUN_MISMATCH,
    "CONFIG_INVALID": CONFIG_INVALID,
    "NO_CHECKPOINT": NO_CHECKPOINT,
    "MODEL_FILE_MISSING": MODEL_FILE_MISSING,
    "RENDER_FAILED": RENDER_FAILED,
}


def shell_values() -> dict[str, int]:
    """``EXIT_<NAME>=<status>`` for the head of a rendered script."""
    return {f"EXIT_{name}": code for name, code in ALL.items()}
