"""The workload section: the training image, the trainer and its rollout, the two launchers
(manual and KubeRay) with their deadlines and restarts, and the model to stage."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .. import pins
from .errors import key_path, raise_all, rule_error, shown
from .model_source import INPUT_SOURCE_FORMS, MODEL_SOURCE_FORMS, ModelSource, parse_model_source
from .types import AbsolutePath, Bool, ChartVersion, Float, Int, Namespace, SettingsModel, dns_label

# Ray releases KubeRay and RLinf must not run (field notes, section 2).
_BAD_RAY = ((2, 11, 0), (2, 37, 0))
# registry/repository[:tag][@digest]: no blanks or quotes (the OCI distribution spec's characters)
IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")

Dialect = Literal["verl-ppo", "rlinf-embodied", "rlinf-reasoning"]
RolloutBackend = Literal["hf", "vllm", "sglang"]


class RolloutSettings(SettingsModel):
    backend: RolloutBackend = "hf"
    """hf (HuggingFace, the default and the one VLA models support), vllm or sglang."""
    tensor_parallel_size: Int = Field(1, ge=1)
    """Tensor parallel size of the rollout engine; must divide the GPUs per node. Defaults to 1."""
    gpu_memory_utilization: Float = Field(0.5, gt=0, le=1)
    """vllm and sglang: the fraction of GPU memory the rollout engine may take. Defaults to 0.5."""
    max_num_batched_tokens: Int = Field(8192, ge=1)
    """vllm: the most tokens in one batch (max_num_batched_tokens). Defaults to 8192."""
    enforce_eager: Bool = True
    """vllm and sglang: run without CUDA graphs (less memory, slower). Defaults to true."""


class TrainerSettings(SettingsModel):
    dialect: Dialect = "verl-ppo"
    """verl-ppo (the seed's main_ppo.py layout, SimpleVLA-RL), rlinf-embodied or rlinf-reasoning (RLinf v0.3)."""
    config_name: Optional[str] = None
    """Hydra config name (every dialect passes it as --config-name). Defaults per dialect: ppo_trainer,
    maniskill_ppo_openvlaoft, qwen2.5-1.5b-grpo-fsdp. Another dialect's reference config is refused."""
    workdir: AbsolutePath = "/workspace"
    """The trainer's checkout inside the image; first on PYTHONPATH."""
    model_path: Optional[str] = None
    """Model (SFT checkpoint) path inside the pod, for a model baked into the image. Mutually
    exclusive with workload.model.source (which stages the model and derives this path)."""
    experiment_name: str = "rlinf"
    """The trainer's experiment name (run directory and logger name). Defaults to rlinf."""
    overrides: list[str] = Field(default_factory=list)
    """Extra Hydra overrides, appended after the generated ones."""
    batch: dict[str, Int] = Field(default_factory=dict)
    """Batch and environment sizes (trainer keys to integers) checked against world-size rules."""

    @field_validator("batch", mode="before")
    @classmethod
    def _whole_keys(cls, value: Any) -> Any:
        """``--set workload.trainer.batch.actor.global_batch_size=64`` nests ``actor``; a batch key is
        the whole Hydra key, quoted on the command line."""
        if not isinstance(value, dict):
            return value
        nested = [(key, inner) for key, inner in value.items() if isinstance(inner, dict)]
        if not nested:
            return value
        lines = []
        for key, inner in nested:
            whole = _leaves(key, inner)
            example = next(iter(whole.items()), (key, 1))
            lines.append(
                f"{key}={shown(inner)}: a batch key is the whole Hydra key, such as "
                f"{example[0]}: quote it on the command line, --set 'workload.trainer.{key_path('batch', example[0])}={example[1]}' "
                f"(a stack file may write it unquoted: batch: {{{example[0]}: {example[1]}}})"
            )
        raise PydanticCustomError("rules", "{text}", {"text": "\n".join(lines)})

    @field_validator("overrides", mode="before")
    @classmethod
    def _one_override(cls, value: Any) -> Any:
        """``--set workload.trainer.overrides=runner.max_steps=100``: one override, a list of one."""
        return [value] if isinstance(value, str) else value

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: list[str]) -> list[str]:
        for item in value:
            if "=" not in item.lstrip("~") and not item.startswith("~"):
                raise PydanticCustomError("override", "{text}", {"text": f"{item!r} is not a Hydra override key=value (or ~key)"})
        return value


_EFA_PIN = (
    "pinned on EFA nodes so that NCCL runs over EFA or fails, never silently over TCP sockets "
    "(rlinf_eks.workload.env); to run without EFA set gpuNodes.efa: false"
)
PINNED_ENV: dict[str, str] = {
    "NCCL_NET": _EFA_PIN,
    "FI_PROVIDER": _EFA_PIN,
    "FI_EFA_*": "libfabric's EFA settings are pinned by the run (fork safety, GPUDirect RDMA where the instance has it)",
    "NCCL_SOCKET_IFNAME": "pinned to the pod's interface eth0 (the VPC CNI's)",
    "GLOO_SOCKET_IFNAME": "pinned to the pod's interface eth0 (the VPC CNI's)",
    "RLINF_COMM_NET_DEVICES": "pinned to the pod's interface eth0 (the VPC CNI's)",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "pinned: a failed or timed-out collective tears the process down, so the restart policy can act (Faults)",
    "TORCH_NCCL_ENABLE_MONITORING": "pinned: a stuck NCCL watchdog kills the process, so the restart policy can act (Faults)",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "set workload.ncclHeartbeatTimeoutSeconds instead (the Faults section reads it)",
    "RLINF_RUN_DIR": "the run's directory: set workload.runName instead",
    "RLINF_NODE_RANK": "set by the launcher from the pod's index",
    "MLFLOW_TRACKING_URI": "set workload.mlflowTrackingUri instead",
    "HF_TOKEN": "a secret: pulumi config set --secret rlinf-eks:hfToken (a plain value lands in the pod spec)",
    "WANDB_API_KEY": "a secret: pulumi config set --secret rlinf-eks:wandbApiKey (a plain value lands in the pod spec)",
}
"""Variables the run sets itself (rlinf_eks.workload.env): workload.env may not set them, as the pod,
the plan's Faults section and the secrets would then disagree. The value is what to do instead.
(PYTHONPATH is not pinned: it is appended after the trainer's checkout.)"""


class RayJobSettings(SettingsModel):
    """KubeRay RayJob options (launcher kuberay)."""

    cluster: Literal["selector", "embedded"] = "embedded"
    """selector: submit to the long-lived RayCluster rlinf-cluster (the seed's form); embedded (the
    default): the RayJob carries its own cluster and shuts it down when it ends, releasing the GPUs."""
    ttl_seconds_after_finished: Int = Field(600, ge=0)
    """Embedded cluster: seconds after the job ends before KubeRay deletes its RayCluster
    (shutdownAfterJobFinishes), which keeps the cluster's logs reachable meanwhile. Defaults to 600."""
    active_deadline_seconds: Optional[Int] = Field(None, ge=1)
    """Fail the RayJob once it has run this long (the RayJob's activeDeadlineSeconds). Defaults to None: no limit."""
    pre_running_deadline_seconds: Optional[Int] = Field(3600, ge=1)
    """Fail the RayJob (and, embedded, delete its cluster, releasing the GPUs) when it is not
    Running this long after it starts: nodes that never come, a failing preflight init container
    retried in CrashLoopBackOff, an image that cannot be pulled. Defaults to one hour (scale-up from
    zero plus a tens-of-GB image pull); null disables it. Needs KubeRay 1.6.0 or newer."""
    backoff_limit: Int = Field(0, ge=0)
    """Retries of a failed RayJob (embedded cluster). Prefer workload.restart.maxRestarts, which sets it. Defaults to 0."""
    submission_mode: Literal["K8sJobMode", "HTTPMode", "SidecarMode"] = "K8sJobMode"
    """How KubeRay submits the job: K8sJobMode (the default: a submitter pod runs ``ray job submit``),
    HTTPMode (the operator calls the dashboard) or SidecarMode (a container in the head pod)."""
    submitter_image: Optional[str] = None
    """K8sJobMode: the image of the submitter pod, which only runs ``ray job submit`` from the
    system nodes. Defaults to ``rayproject/ray:<rayVersion>`` (KubeRay's own default is the
    training image, tens of GB pulled onto a system node)."""


class ModelSettings(SettingsModel):
    """Where the trainer's model comes from, staged into the pods before the trainer starts."""

    source: Optional[str] = None
    """hf://Org/Name[@revision] (Hugging Face, with the hfToken secret for gated or private
    repos) or s3://bucket/prefix (read with the training role). Staged once by an init container
    into <sharedFilesystem.mountPath>/models/... (shared by every pod and every run), else into a
    node-local emptyDir; the trainer's model path is derived from it. The same as
    workload.inputs.model. Defaults to None: the model of the trainer config's recipe (plan lists
    it), or workload.trainer.modelPath for a model baked into the image."""
    size_gib: Int = Field(64, ge=1, le=4096)
    """Without the shared filesystem: the size limit of the node-local emptyDir every staged input
    (model, adapter, dataset, assets) goes into (on the root volume, or on the NVMe RAID0 with
    gpuNodes.localNvmeRaid0). Defaults to 64 GiB (a 7B model in bf16 is about 15 GiB)."""

    @field_validator("source")
    @classmethod
    def _source(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            try:
                parse_model_source(value)
            except ValueError as err:
                raise PydanticCustomError("model", "{text}; valid forms: {forms}", {"text": str(err), "forms": MODEL_SOURCE_FORMS}) from None
        return value

    @property
    def parsed(self) -> Optional[ModelSource]:
        return parse_model_source(self.source) if self.source else None


class ManualJobSettings(SettingsModel):
    """Deadlines of the manual launcher's Indexed Job (the RayJob's are in workload.rayjob)."""

    active_deadline_seconds: Optional[Int] = Field(None, ge=1)
    """Fail the Job, stopping every pod, once it has run this long (the Job's activeDeadlineSeconds).
    Defaults to None: no limit."""
    pre_running_deadline_seconds: Optional[Int] = Field(3600, ge=60)
    """Fail the Job when its pods are not all Running this long after it starts: nodes that never
    come, an image that cannot be pulled, a pod that cannot be scheduled, a staging or preflight
    init container that does not finish. Kubernetes Jobs have no such deadline, so a watchdog Job on
    the system nodes enforces it. Defaults to one hour, like rayjob.preRunningDeadlineSeconds;
    null disables it (and the watchdog)."""
    watchdog_image: Optional[str] = None
    """The watchdog's image: bash and kubectl. Defaults to registry.k8s.io/kubectl at the cluster's
    Kubernetes minor (that image carries bash since Kubernetes 1.28, kubernetes/kubernetes#119592)."""

    @field_validator("watchdog_image")
    @classmethod
    def _watchdog_image(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not IMAGE_REFERENCE.fullmatch(value):
            raise PydanticCustomError("image", "a container image reference such as registry.k8s.io/kubectl:v1.34.0")
        return value

    @model_validator(mode="after")
    def _deadlines(self) -> "ManualJobSettings":
        ads, pre = self.active_deadline_seconds, self.pre_running_deadline_seconds
        if ads is not None and pre is not None and pre >= ads:
            raise rule_error("preRunningDeadlineSeconds", pre, f"must be shorter than activeDeadlineSeconds ({ads}), which would end the Job first")
        return self


class RestartSettings(SettingsModel):
    """Automatic gang restart of a failed run (both launchers)."""

    max_restarts: Int = Field(0, ge=0, le=100)
    """Restart the whole gang (every pod recreated, resuming from the newest complete checkpoint)
    up to this many times after a failure: a pod, a node, NCCL. 0 (the default): a failed run stays
    failed. Manual launcher: the run becomes a JobSet (the JobSet controller is installed); kuberay:
    the RayJob's backoffLimit. A trainer that fails again from the same checkpoint is not retried;
    node faults do not count (manual launcher only)."""
    backoff_seconds: Int = Field(60, ge=0, le=3600)
    """Manual launcher: restart attempt N waits N x this long before it starts (JobSet restarts at
    once: its failurePolicy has no backoff). Defaults to 60 s."""
    jobset_version: ChartVersion = pins.version("jobset")
    """Manual launcher with restarts: the JobSet chart version (oci://registry.k8s.io/jobset/charts/jobset).
    0.10.1 or newer: the failure rules match Job failure messages (onJobFailureMessagePatterns, new
    in 0.10.0, whose chart's CRD lacked it until 0.10.1: the API server would prune the patterns, and
    a repeated failure would then match the node-fault rule and restart for ever)."""
    jobset_namespace: Namespace = "jobset-system"
    """Namespace of the JobSet controller release. Defaults to jobset-system."""

    @field_validator("jobset_version")
    @classmethod
    def _jobset_version(cls, value: str) -> str:
        parts = tuple(int(p) for p in re.findall(r"\d+", value)[:3])
        # jobset CHANGELOG-0.10: v0.10.1 "Generate JobSet CRD for Helm chart for 0.10" (#1048)
        if parts < (0, 10, 1):
            raise PydanticCustomError(
                "jobset",
                "JobSet chart 0.10.1 or newer (onJobFailureMessagePatterns, which tells a node fault from a trainer bug;"
                " the 0.10.0 chart's CRD drops it)",
            )
        return value


class CheckpointSettings(SettingsModel):
    """How many checkpoints the run keeps, on the node and in the bucket (both launchers)."""

    keep_local: Int = Field(2, ge=1, le=1000)
    """Checkpoints kept in the run directory, counting the one being written: once a checkpoint is
    complete and S3 holds it (without the shared filesystem: the sync sidecar uploaded it; on FSx:
    15 minutes after it was marked complete, FSx's export being asynchronous), the launcher removes
    older ones beyond this many from the run directory. The newest complete one is never removed
    (nor the one the run resumed from while nothing newer is complete), so the directory holds at
    most max(keepLocal, 2) + 1 saves while the uploads keep pace with the saves. A dialect that
    cannot resume (verl-ppo) writes each attempt below its own attempt-<K>: an earlier attempt's
    checkpoints count as older than the current one's. Defaults to 2: the resume point and the one
    being written."""
    keep_in_bucket: Optional[Int] = Field(None, ge=1, le=100000)
    """Without the shared filesystem: complete checkpoints kept in the bucket under the run's prefix
    (the newest ones of each checkpoint directory, an earlier attempt's older than any of the
    current one's); the sync sidecar deletes older ones after each upload, and their noncurrent
    versions expire with the bucket's lifecycle rule (30 days). At least keepLocal (the node's
    would be uploaded again). Refused with the shared filesystem, where nothing deletes from the
    bucket (FSx exports new and changed files, never a deletion). Defaults to None: the bucket
    keeps every checkpoint."""

    @model_validator(mode="after")
    def _bucket_keeps_the_nodes(self) -> "CheckpointSettings":
        if self.keep_in_bucket is not None and self.keep_in_bucket < self.keep_local:
            raise rule_error(
                "keepInBucket",
                self.keep_in_bucket,
                f"at least keepLocal ({self.keep_local}): the sync would upload again the checkpoints the node keeps, then delete them",
            )
        return self


EVAL_CHECKPOINT = re.compile(r"global_step_\d+|/[^\s]*/global_step_\d+/?")


class EvalSettings(SettingsModel):
    """workload.mode eval: which checkpoint the upstream evaluation runs on."""

    checkpoint: Optional[str] = None
    """The checkpoint to evaluate: a name such as global_step_49 (found among the run's complete
    checkpoints) or an absolute path ending in global_step_<N> (not checked for completeness).
    Defaults to None: the newest complete checkpoint of the run, chosen when the pod starts."""

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not EVAL_CHECKPOINT.fullmatch(value):
            raise PydanticCustomError(
                "checkpoint", "a checkpoint name such as global_step_49, or an absolute path ending in global_step_<N>"
            )
        return value

    @property
    def checkpoint_name(self) -> Optional[str]:
        """global_step_<N> of the named checkpoint, None for the newest."""
        return self.checkpoint.rstrip("/").rsplit("/", 1)[-1] if self.checkpoint else None


class WorkloadSettings(SettingsModel):
    enabled: Bool = True
    """Create the training workload. Defaults to true."""
    mode: Literal["train", "eval"] = "train"
    """train (the default): train, resuming from the newest complete checkpoint; eval: run the
    dialect's upstream evaluation on one checkpoint of the run (workload.eval.checkpoint, else the
    newest complete one) as its own Job (RayJob with kuberay) named evaluation, on the same pods
    and queue, writing its metrics and videos to <run directory>/eval/step-<N>/ and never into the
    checkpoints. rlinf-reasoning has no upstream evaluation at v0.3 and is refused."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """workload.mode eval: the checkpoint to evaluate."""
    namespace: Annotated[str, dns_label("a DNS-1035 label")] = "rlinf"
    """Namespace of the training pods, their service account and secrets. Defaults to rlinf."""
    launcher: Literal["manual", "kuberay"] = "manual"
    """manual (the seed's default): a headless Service and an Indexed Job; kuberay: RayCluster + RayJob."""
    image: str = Field(min_length=1)
    """The training image (RLinf or SimpleVLA-RL, with libfabric and aws-ofi-nccl)."""
    ray_version: str = pins.version("ray")
    """The Ray version inside the image (KubeRay's rayVersion)."""
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    """What the trainer runs: dialect, Hydra config, model path, overrides and batch sizes."""
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    """The rollout engine and its settings."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables of every Ray pod. One the trainer dies of at startup with the rollout
    backend is refused (its recipe's startup.environment: RLinf's vLLM rollout and PYTORCH_CUDA_ALLOC_CONF
    with expandable_segments:True)."""
    mlflow_tracking_uri: Optional[str] = None
    """Set as MLFLOW_TRACKING_URI in every Ray pod. Defaults to None: not set."""
    shm_fraction: Float = Field(0.4, gt=0, lt=1)
    """Share of the pod's memory backing /dev/shm (Ray's object store). Defaults to 0.4."""
    join_timeout_seconds: Int = Field(1200, ge=60)
    """How long pod 0 waits for every node to join Ray before failing. Defaults to 20 minutes."""
    termination_grace_period_seconds: Int = Field(900, ge=30)
    """Time to flush a checkpoint on eviction. Defaults to 15 minutes."""
    progress_timeout_seconds: Optional[Int] = Field(1800, ge=60)
    """Stop the trainer (the pod then fails with exit status 91, releasing its GPUs) when it has
    printed nothing and written no new global_step_N checkpoint directory for this long: a hang.
    Longer than the slowest step plus a checkpoint save, or that step is taken for a hang.
    Defaults to 30 minutes; null disables the watchdog."""
    nccl_heartbeat_timeout_seconds: Int = Field(600, ge=60)
    """TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: torch's monitoring thread aborts a process whose NCCL
    watchdog thread is stuck (in a CUDA or NCCL call that hangs) this long. Defaults to 10 minutes."""
    rayjob: RayJobSettings = Field(default_factory=RayJobSettings)
    """KubeRay RayJob options (launcher kuberay)."""
    manual: ManualJobSettings = Field(default_factory=ManualJobSettings)
    """Deadlines of the manual launcher's Job."""
    restart: RestartSettings = Field(default_factory=RestartSettings)
    """Automatic gang restart of a failed run."""
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    """How many checkpoints are kept on the node and in the bucket."""
    model: ModelSettings = Field(default_factory=ModelSettings)
    """Where the model comes from and how it is staged."""
    run_name: Optional[Annotated[str, dns_label("a DNS-1123 label such as qwen-7b-try2")]] = None
    """Names the run: its directory is <sharedFilesystem.mountPath>/<stack>-runs/<runName> (without
    the shared filesystem, the node-local run directory is synced to s3://<bucket>/<stack>-runs/<runName>/). Set a new one to train another model or config
    of the same stack beside the old run, whose checkpoints stay where they are. Defaults to None:
    the run directory is <mountPath>/<stack>, and a run whose model, dialect or trainer config
    differs from the one whose checkpoints are there stops at once (exit 94, not retried by the
    manual launcher) instead of resuming from them."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Swap any input of the trainer's recipe for your own, by name (``python -m rlinf_eks plan``
    lists each config's inputs: model, lora, assets, dataset): hf://Org/Name[@revision],
    hf://datasets/Org/Name[@revision][/file or folder] or s3://bucket/prefix (staged like the model,
    once, before the trainer starts), or an absolute path the pod already has (in the image or on
    the shared filesystem; not staged). Defaults to {}: every input from the recipe's source."""
    checkpoint_sync_image: str = f"public.ecr.aws/aws-cli/aws-cli:{pins.version('aws-cli')}"
    """Without the shared filesystem: the image (with the AWS CLI) that restores the run directory
    from s3://<bucket>/<stack>/ at start and syncs it back. Defaults to public.ecr.aws/aws-cli/aws-cli at the pin in
    components/pins.yaml."""
    checkpoint_sync_interval_seconds: Int = Field(300, ge=30)
    """Without the shared filesystem: seconds between uploads of the run directory to S3 (plus one
    final upload when the trainer ends or the pod is stopped). Defaults to 5 minutes."""

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        # Quotes or blanks come from shell quoting slips (--set 'workload.image=""'); the kubelet
        # would only fail at pull time (InvalidImageName), after the GPU nodes are paid for.
        if not IMAGE_REFERENCE.fullmatch(value):
            raise PydanticCustomError(
                "image", "a container image reference such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/rlinf:v0.3"
            )
        return value

    @field_validator("ray_version")
    @classmethod
    def _ray_version(cls, value: str) -> str:
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", value)
        if not match:
            raise PydanticCustomError("ray", "a Ray release such as 2.49.2")
        version = tuple(map(int, match.groups()))
        if _BAD_RAY[0] <= version <= _BAD_RAY[1]:
            raise PydanticCustomError("ray", "Ray 2.11.0 to 2.37.0 are not supported by KubeRay 1.7; use 2.38.0 or newer")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        # The API server rejects the pod otherwise (apimachinery IsEnvVarName), after the nodes are up.
        bad = [name for name in value if not re.fullmatch(r"[-._a-zA-Z][-._a-zA-Z0-9]*", name)]
        if bad:
            raise PydanticCustomError(
                "env", "{text}", {"text": f"{', '.join(map(repr, bad))}: environment variable names are letters, digits, '_', '-' or '.', not starting with a digit"}
            )
        pinned = [
            f"{name}={value[name]!r}: {PINNED_ENV['FI_EFA_*' if name.startswith('FI_EFA_') else name]}"
            for name in value if name in PINNED_ENV or name.startswith("FI_EFA_")
        ]  # fmt: skip
        if pinned:
            raise PydanticCustomError("rules", "{text}", {"text": "\n".join(pinned)})
        return value

    @model_validator(mode="after")
    def _inputs(self) -> "WorkloadSettings":
        errors = []
        for name, value in self.inputs.items():
            path = key_path("inputs", name)
            if not re.fullmatch(r"[a-z][a-z0-9-]{0,40}", name):
                errors.append(rule_error(path, value, "input names are lowercase letters, digits and '-' (model, lora, assets, dataset)"))
            elif value.startswith("~"):
                errors.append(rule_error(path, value, "no trainer expands '~': give an absolute path, or an hf:// or s3:// source to stage"))
            elif value.startswith("/"):
                if ".." in value.split("/") or any(c.isspace() for c in value):
                    errors.append(rule_error(path, value, "an absolute path without '..' or blanks"))
            else:
                try:
                    parse_model_source(value)
                except ValueError as err:
                    text = str(err).replace("not a model source", "not an input source").replace(
                        "a path inside the image is workload.trainer.modelPath", "a path in the pod starts with /"
                    )
                    errors.append(rule_error(path, value, f"{text}; valid forms: {INPUT_SOURCE_FORMS}"))
        if "model" in self.inputs and (self.model.source or self.trainer.model_path):
            given = "model.source" if self.model.source else "trainer.modelPath"
            errors.append(rule_error("inputs.model", self.inputs["model"], f"{given} names the model already: keep one of them"))
        raise_all(errors)
        return self

    @model_validator(mode="after")
    def _model_source(self) -> "WorkloadSettings":
        if self.model.source and self.trainer.model_path:
            raise rule_error(
                "model.source",
                self.model.source,
                f"the model path is derived from it, so trainer.modelPath ({self.trainer.model_path!r}) must not be given too: "
                "keep model.source to stage the model, or trainer.modelPath for a model already inside the image",
            )
        return self

    @model_validator(mode="after")
    def _restarts(self) -> "WorkloadSettings":
        restarts, rayjob = self.restart.max_restarts, self.rayjob
        if self.launcher != "kuberay" or not restarts:
            return self
        if rayjob.cluster == "selector":
            raise rule_error(
                "restart.maxRestarts", restarts,
                "KubeRay retries only a RayJob with its own cluster: set rayjob.cluster: embedded, or maxRestarts: 0",
            )
        if rayjob.backoff_limit not in (0, restarts):
            raise rule_error(
                "rayjob.backoffLimit", rayjob.backoff_limit,
                f"is the RayJob's retry count, which restart.maxRestarts ({restarts}) already sets: drop rayjob.backoffLimit",
            )
        return self

    @property
    def rayjob_backoff_limit(self) -> int:
        """The RayJob's backoffLimit: restart.maxRestarts, else the older rayjob.backoffLimit."""
        return self.restart.max_restarts or self.rayjob.backoff_limit

    @property
    def uses_jobset(self) -> bool:
        """The manual launcher renders a JobSet (and needs its controller) when it restarts."""
        return self.enabled and self.launcher == "manual" and self.restart.max_restarts > 0


def _leaves(prefix: str, node: Any) -> dict[str, Any]:
    """``{"actor": {"global_batch_size": 64}}`` as ``{"actor.global_batch_size": 64}``."""
    if not isinstance(node, dict):
        return {prefix: node}
    return {key: value for name, inner in node.items() for key, value in _leaves(f"{prefix}.{name}", inner).items()}
