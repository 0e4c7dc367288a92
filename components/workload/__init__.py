"""The RLinf training run: every GPU and EFA interface of the GPU nodes, one Ray pod per node.

Launchers (``workload.launcher``):
- ``manual`` (:mod:`.manual`): headless Service ``training-svc`` + Indexed Job ``training``, or
  with ``workload.restart.maxRestarts`` > 0 a JobSet ``training`` around that Job (gang restart);
- ``kuberay`` (:mod:`.rayjob`): RayCluster ``rlinf-cluster`` / RayJob ``rlinf-training``.

The run is resolved once (:mod:`.run`: paths, pod shape, model staging, pod names, the trainer's
launch) and everything here is built from it. Every Ray pod (:mod:`.template`): the catalog's pod
shape, EFA and NCCL env (:mod:`.env`), the fabric check (:mod:`.fabric`), the shared filesystem
or S3-synced checkpoints (:mod:`.checkpoint_sync`), secrets by reference, optional preflight
(:mod:`.preflight`) and model staging (:mod:`.staging`). The launch scripts (:mod:`.scripts`)
live in a ConfigMap, so the user's image needs no change.

The modules form a one-way stack, each importing only those below it: :mod:`.kube` (Kubernetes
object helpers) and :mod:`.scripts` (script rendering) at the bottom; :mod:`.manual`; :mod:`.run`;
:mod:`.env`; :mod:`.fabric`, :mod:`.checkpoint_sync`, :mod:`.preflight`, :mod:`.staging`;
:mod:`.template`; :mod:`.rayjob`, :mod:`.watchdog`, :mod:`.progress`, :mod:`.network_policy`;
this package. :mod:`.standalone` (``TrainingSettings``, RlinfTraining's own settings for a
program with its own cluster) imports only config and the loading step.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..config import StackSettings
from ..jobset import JobSetController
from ..kuberay import KubeRayOperator
from ..kueue import pod_annotations, run_labels
from ..loading import parse
from ..scheduling import DO_NOT_DISRUPT_ANNOTATION
from . import config_check, fabric, image_check, manual, network_policy, progress, rayjob, render_check, scripts, watchdog
from .image_contract import contract_for
from .env import SECRET_ENV, plain_env, trainer_pythonpath
from .kube import APP_LABELS, RAY_CONTAINER, SCRIPTS_DIR, STATE_DIR, meta, to_manifest
from .preflight import PREFLIGHT_SCRIPT, preflight_script
from .run import Run, resolve_run
from .staging import STAGE_SCRIPT, stage_script
from .standalone import TrainingSettings
from .template import RayPodInputs, ray_pod_template

__all__ = [
    "RESUME_ANNOTATION", "RUN_DIR_ANNOTATION", "RUN_IDENTITY_ANNOTATION", "RlinfTraining", "Run", "TrainingSettings", "launch_scripts",
    "resolve_run",
]

LAUNCH_CONFIG_MAP = "rlinf-launch"
SECRET_NAME = "rlinf-training-secrets"
TRAINER_SCRIPT = "trainer.sh"
# The Job runs for days: pulumi-kubernetes would otherwise wait for it to complete (and time out
# after 10 minutes). Its outcome is the Job's status, not the deployment's.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
RUN_IDENTITY_ANNOTATION = "rlinf-eks/run-identity"
RUN_DIR_ANNOTATION = "rlinf-eks/run-dir"
RESUME_ANNOTATION = "rlinf-eks/resume"
EVAL_CHECKPOINT_ANNOTATION = "rlinf-eks/eval-checkpoint"
"""workload.mode eval: the checkpoint the evaluation runs on (a name, a path, or the newest complete one)."""


def run_annotations(run: Run) -> dict[str, str]:
    """On the run's Job, JobSet or RayJob: what its checkpoints belong to, where they are and
    whether the trainer resumes from them (the diff reads them to say what a new run does)."""
    resume = "newest-complete-checkpoint" if run.launch.resume is not None else "none"
    annotations = {**SKIP_AWAIT, RUN_IDENTITY_ANNOTATION: run.identity, RUN_DIR_ANNOTATION: run.paths.location, RESUME_ANNOTATION: resume}
    if run.settings.workload.mode == "eval":
        checkpoint = run.settings.workload.eval.checkpoint or "newest-complete-checkpoint"
        annotations[EVAL_CHECKPOINT_ANNOTATION] = checkpoint
    return annotations


def launch_scripts(run: Run, *, retain: bool = True) -> dict[str, str]:
    """The ConfigMap's files, by name. ``retain``: the launcher may remove older checkpoints
    (workload.checkpoints.keepLocal) once the bucket holds them; False on a shared claim that
    exports nothing to the bucket."""
    settings, launch, paths, shape, names, nnodes = run.settings, run.launch, run.paths, run.shape, run.names, run.nnodes
    pythonpath = trainer_pythonpath(settings, launch.env)
    files = {TRAINER_SCRIPT: launch.script()}
    # eval mode: the launcher's own state (run identity, last failure) beside the evaluations, never
    # in the training run's .rlinf-eks (trainer.sh checks the training run's identity, read only)
    launcher_dir = paths.eval_dir if settings.workload.mode == "eval" else paths.root
    # the launcher's retention of older checkpoints (eval mode writes none)
    keep_local = settings.workload.checkpoints.keep_local if settings.workload.mode != "eval" and retain else 0
    if settings.workload.launcher == "manual":
        files["launch.sh"] = scripts.manual_launch(
            nnodes=nnodes,
            gpus_per_node=shape.pod.gpus,
            cpus_per_node=shape.ray_cpus,
            object_store_bytes=shape.object_store_bytes,
            head_host=run.head_host,
            ray_port=manual.RAY_GCS_PORT,
            join_timeout_seconds=settings.workload.join_timeout_seconds,
            grace_seconds=settings.workload.termination_grace_period_seconds,
            run_dir=launcher_dir,
            state_dir=STATE_DIR,
            trainer_pythonpath=pythonpath,
            trainer_script=f"{SCRIPTS_DIR}/{TRAINER_SCRIPT}",
            checkpoint_patterns=launch.checkpoint_patterns,
            node_rank_env=launch.node_rank_env,
            run_identity=run.identity,
            keep_local=keep_local,
            shared=run.shared,
        )
    else:
        files["driver.sh"] = scripts.kuberay_driver(
            trainer_pythonpath=pythonpath,
            trainer_script=f"{SCRIPTS_DIR}/{TRAINER_SCRIPT}",
            checkpoint_patterns=launch.checkpoint_patterns,
            run_dir=launcher_dir,
            run_identity=run.identity,
            state_dir=STATE_DIR,
            keep_local=keep_local,
            shared=run.shared,
        )
    files[progress.PROGRESS_SCRIPT] = progress.for_stack(settings, paths.root)
    files[image_check.IMAGE_CHECK_SCRIPT] = image_check.image_check_script(contract_for(run))
    files[config_check.CONFIG_CHECK_SCRIPT] = config_check.config_check_script(run)
    if shape.efa:
        files[fabric.FABRIC_CHECK_SCRIPT] = fabric.fabric_check_script(settings, shape=shape)
    if render_check.renderer_for(settings) is not None:
        files[render_check.RENDER_CHECK_SCRIPT] = render_check.render_check_script(settings)
    if settings.preflight.enabled:
        multi_node = settings.workload.launcher == "manual" and nnodes > 1 and run.shared
        files[PREFLIGHT_SCRIPT] = preflight_script(
            settings,
            shape=shape,
            nnodes=nnodes,
            host_prefix=names.host_prefix,
            service=names.service,
            exchange_dir=f"{settings.storage.shared_filesystem.mount_path.rstrip('/')}/.preflight" if multi_node else None,
        )
    if watchdog.enabled(settings):
        files[watchdog.WATCHDOG_SCRIPT] = watchdog.watchdog_script(
            namespace=settings.workload.namespace,
            job_name=names.job,
            expected_pods=nnodes,
            deadline_seconds=settings.workload.manual.pre_running_deadline_seconds,
            not_before=settings.gpu_nodes.scheduled_start,
        )
    if run.staging is not None:
        files[STAGE_SCRIPT] = stage_script()
    if not run.shared:
        files["restore.sh"] = scripts.restore(settings.workload.eval.checkpoint if settings.workload.mode == "eval" else None)
        keep_in_bucket = settings.workload.checkpoints.keep_in_bucket if settings.workload.mode != "eval" else None
        files["sync.sh"] = scripts.sync(keep_in_bucket)
    return files


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def _fingerprint(files: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def _check_shared_filesystem(settings: StackSettings, claim: Optional[pulumi.Input[str]]) -> None:
    """The settings decide whether the run has the shared filesystem; the claim must agree."""
    wanted = settings.shared_filesystem
    if wanted == (claim is not None):
        return
    enabled = settings.storage.shared_filesystem.enabled
    why = (
        f"storage.sharedFilesystem.enabled: {'unset' if enabled is None else str(enabled).lower()}, "
        f"gpuNodes.nodeCount: {settings.gpu_nodes.node_count}; unset means on for more than one node"
    )
    if wanted:
        raise ValueError(
            f"RlinfTraining: the settings use the shared filesystem ({why}) but no shared_volume_claim was given: "
            "pass the SharedFilesystem's claim_name"
        )
    raise ValueError(
        f"RlinfTraining: a shared_volume_claim was given but the settings do not use the shared filesystem ({why}): "
        "drop the claim, or set storage.sharedFilesystem.enabled: true"
    )


class RlinfTraining(pulumi.ComponentResource):
    """The training run of a stack, built from its :class:`Run` (:func:`resolve_run`).

    Args:
        settings: ``StackSettings`` (or a mapping with its camelCase keys): launcher, image,
            trainer, preflight and storage come from there, and so does whether the run has the
            shared filesystem (``StackSettings.shared_filesystem``). A program with its own
            cluster passes :class:`TrainingSettings` instead: only the sections the run reads
            (workload, gpuNodes, storage with the shared filesystem stated, preflight, the
            cluster's Kubernetes version, kuberay), checked by the stack's rules over them.
        service_account_name: the IRSA service account the training pods run as (training-sa).
        bucket_name: the checkpoint bucket.
        shared_volume_claim: the shared filesystem's PersistentVolumeClaim (the SharedFilesystem's
            ``claim_name``): given exactly when the settings use the shared filesystem, else
            ValueError. Without the shared filesystem, checkpoints are synced to
            s3://<bucket>/<stack>/.
        shared_volume_exported: the claim's filesystem exports new files to the checkpoint bucket
            (a SharedFilesystem's, whose data repository association does): only then does the
            launcher remove older checkpoints from it (``workload.checkpoints.keepLocal``). Another
            claim (EFS, NFS, an FSx of your own) keeps every checkpoint. Defaults to False.
        hf_token: the Hugging Face token, a secret Output; None when unset.
        wandb_api_key: the W&B API key, a secret Output; None when unset (the trainer then does not
            log to W&B).
        operator: the KubeRayOperator (launcher kuberay): the RayCluster and RayJob depend on its
            Helm release. None: no such dependency.
        jobset: the JobSetController, required by the manual launcher with
            ``workload.restart.maxRestarts`` > 0 (the JobSet depends on its Helm release), unless
            ``controllers_installed``.
        controllers_installed: the JobSet controller and the KubeRay operator were installed by
            another stack (an experiment's platform): nothing here depends on them. Defaults to False.
        opts: carries the cluster's Kubernetes provider.

    Outputs: ``entrypoint`` (the trainer's command line), ``launch`` (the TrainerLaunch, plain) and
    ``run`` (the :class:`Run`, plain).
    """

    entrypoint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        settings: StackSettings | TrainingSettings | Mapping[str, Any],
        service_account_name: pulumi.Input[str],
        bucket_name: pulumi.Input[str],
        shared_volume_claim: Optional[pulumi.Input[str]] = None,
        shared_volume_exported: bool = False,
        hf_token: Optional[pulumi.Input[str]] = None,
        wandb_api_key: Optional[pulumi.Input[str]] = None,
        operator: Optional[KubeRayOperator] = None,
        jobset: Optional[JobSetController] = None,
        controllers_installed: bool = False,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("rlinf-eks:index:RlinfTraining", name, None, opts)
        if isinstance(settings, TrainingSettings):
            settings = settings.stack_settings(pulumi.get_stack())  # the rules over its sections: one ConfigError
        elif not isinstance(settings, StackSettings):
            settings = parse(settings, pulumi.get_stack())  # every rule, the trainers' too: one ConfigError
        _check_shared_filesystem(settings, shared_volume_claim)
        self._controllers_installed = controllers_installed
        wl = settings.workload
        namespace = wl.namespace
        self.run = run = resolve_run(settings, pulumi.get_stack(), wandb=wandb_api_key is not None)
        self.launch = run.launch
        for warning in self.launch.warnings:
            pulumi.log.warn(warning, self)
        child = pulumi.ResourceOptions(parent=self)

        secret_values = {SECRET_ENV[k]: v for k, v in (("hf_token", hf_token), ("wandb_api_key", wandb_api_key)) if v is not None}
        if secret_values:
            k8s.core.v1.Secret(
                f"{name}-secrets",
                metadata=meta.ObjectMetaArgs(name=SECRET_NAME, namespace=namespace, labels=dict(APP_LABELS)),
                type="Opaque",
                string_data={k: pulumi.Output.secret(v) for k, v in secret_values.items()},
                opts=child,
            )

        # on a shared claim, checkpoints leave it only where the bucket gets a copy
        files = launch_scripts(run, retain=not run.shared or shared_volume_exported)
        k8s.core.v1.ConfigMap(
            f"{name}-launch",
            metadata=meta.ObjectMetaArgs(name=LAUNCH_CONFIG_MAP, namespace=namespace, labels=dict(APP_LABELS)),
            data=files,
            opts=child,
        )
        pod_inputs = RayPodInputs(
            run=run,
            plain_env=plain_env(settings, run.launch.env, run.paths),
            secret_name=SECRET_NAME if secret_values else None,
            secret_keys=sorted(secret_values),
            service_account=service_account_name,
            claim_name=shared_volume_claim,
            bucket_name=bucket_name,
            config_map=LAUNCH_CONFIG_MAP,
        )
        # a changed script means a new run: the Job's template changes, so Pulumi replaces the Job
        annotations = {"rlinf-eks/launch-sha256": _fingerprint(files)}
        # Kueue: the pods' network layer (queue.topology), read by Kueue from the pod templates
        annotations.update(pod_annotations(settings))
        # Karpenter: consolidation (or drift, expiry) never takes a node from under a running run
        if settings.gpu_nodes.provisioner == "karpenter":
            annotations.update(DO_NOT_DISRUPT_ANNOTATION)
        if wl.launcher == "manual":
            self._manual(name, namespace, pod_inputs, annotations, jobset)
        else:
            self._kuberay(name, namespace, pod_inputs, annotations, operator)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy",
            metadata=meta.ObjectMetaArgs(name=network_policy.NAME, namespace=namespace, labels=dict(APP_LABELS)),
            spec=network_policy.training_network_policy_spec(
                manual.LAUNCHER_LABELS if wl.launcher == "manual" else rayjob.POD_LABELS,
                scraper_namespace=settings.observability.prometheus.namespace if settings.observability_backend == "prometheus" else None,
            ),
            opts=child,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-deny-ingress",
            metadata=meta.ObjectMetaArgs(name=network_policy.DENY_NAME, namespace=namespace, labels=dict(APP_LABELS)),
            spec=network_policy.deny_ingress_spec(APP_LABELS),
            opts=child,
        )

        self.entrypoint = pulumi.Output.from_input(self.launch.shell())
        self.register_outputs({"entrypoint": self.entrypoint})

    def _manual(
        self, name: str, namespace: str, pod_inputs: RayPodInputs, annotations: dict[str, str], jobset: Optional[JobSetController]
    ) -> None:
        run = pod_inputs.run
        settings = run.settings
        restarts = settings.workload.uses_jobset
        depends: list[pulumi.Resource] = []
        if restarts:
            if jobset is None and not self._controllers_installed:
                raise ValueError("workload.restart.maxRestarts > 0 needs the JobSet controller (program.build passes it as jobset=)")
            if jobset is not None:
                depends.append(jobset.release)
        else:
            depends.append(
                k8s.core.v1.Service(
                    f"{name}-head-service",
                    metadata=meta.ObjectMetaArgs(name=run.names.service, namespace=namespace, labels=dict(APP_LABELS)),
                    spec=manual.headless_service_spec(),
                    # a Service's cluster IPs cannot change once set (clusterIP: the provider replaces)
                    opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["spec.clusterIPs"], delete_before_replace=True),
                )
            )
        template = ray_pod_template(
            pod_inputs,
            container_name=RAY_CONTAINER,
            command=["/bin/bash", f"{SCRIPTS_DIR}/launch.sh"],
            labels=manual.LAUNCHER_LABELS,
            annotations=annotations,
            restart_policy="Never",
            # in a JobSet, JobSet sets the subdomain (network.enableDNSHostnames)
            subdomain=None if restarts else run.names.service,
            first_init_containers=[manual.backoff_container(settings)] if restarts else (),
        )
        job_spec = manual.job_spec(
            nnodes=run.nnodes,
            template=template,
            kubernetes_version=settings.cluster.kubernetes_version,
            active_deadline_seconds=settings.workload.manual.active_deadline_seconds,
            restarts=restarts,
        )
        # a Job's template is immutable and its name fixed: a new run replaces it, delete first
        run_opts = pulumi.ResourceOptions(parent=self, depends_on=depends, delete_before_replace=True)
        immutable = manual.JOBSET_REPLACE_ON_CHANGES if restarts else manual.JOB_REPLACE_ON_CHANGES
        run_opts = pulumi.ResourceOptions.merge(run_opts, pulumi.ResourceOptions(replace_on_changes=list(immutable)))
        job: pulumi.Resource
        if restarts:
            job = k8s.apiextensions.CustomResource(
                f"{name}-jobset",
                api_version="jobset.x-k8s.io/v1alpha2",
                kind="JobSet",
                metadata=meta.ObjectMetaArgs(
                    name=run.names.owner, namespace=namespace, labels={**APP_LABELS, **run_labels(settings)}, annotations=run_annotations(run)
                ),
                spec=manual.jobset_spec(job=to_manifest(job_spec), max_restarts=settings.workload.restart.max_restarts),
                opts=run_opts,
            )
        else:
            job = k8s.batch.v1.Job(
                f"{name}-job",
                metadata=meta.ObjectMetaArgs(
                    name=run.names.owner, namespace=namespace, labels={**APP_LABELS, **run_labels(settings)}, annotations=run_annotations(run)
                ),
                spec=job_spec,
                opts=run_opts,
            )
        if watchdog.enabled(settings):
            self._watchdog(
                name, namespace, job, run.names.job, pulumi.Output.from_input(to_manifest(job_spec)).apply(watchdog.training_job_fingerprint)
            )

    def _watchdog(self, name: str, namespace: str, job: pulumi.Resource, job_name: str, training_job_sha: pulumi.Output[str]) -> None:
        """The pre-running deadline of the manual Job (see :mod:`.watchdog`); in a JobSet, of its
        child Job (first attempt: the watchdog ends once every pod has run)."""
        child = pulumi.ResourceOptions(parent=self)
        labels = dict(watchdog.WATCHDOG_LABELS)
        metadata = meta.ObjectMetaArgs(name=watchdog.WATCHDOG_NAME, namespace=namespace, labels=labels)
        account = k8s.core.v1.ServiceAccount(f"{name}-watchdog-sa", metadata=metadata, opts=child)
        role = k8s.rbac.v1.Role(
            f"{name}-watchdog-role",
            metadata=metadata,
            rules=[k8s.rbac.v1.PolicyRuleArgs(**{_snake(k): v for k, v in rule.items()}) for rule in watchdog.role_rules(job_name)],
            opts=child,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-watchdog-binding",
            metadata=metadata,
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=watchdog.WATCHDOG_NAME),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=watchdog.WATCHDOG_NAME, namespace=namespace)],
            opts=child,
        )
        k8s.batch.v1.Job(
            f"{name}-watchdog",
            metadata=meta.ObjectMetaArgs(
                name=watchdog.WATCHDOG_NAME, namespace=namespace, labels=labels, annotations=dict(SKIP_AWAIT)
            ),
            spec=watchdog.watchdog_job_spec(
                self.run.settings, config_map=LAUNCH_CONFIG_MAP, script_key=watchdog.WATCHDOG_SCRIPT, training_job_sha=training_job_sha
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[job, account, role, binding],
                delete_before_replace=True,
                replace_on_changes=list(manual.JOB_REPLACE_ON_CHANGES),
            ),
        )

    def _kuberay(
        self, name: str, namespace: str, pod_inputs: RayPodInputs, annotations: dict[str, str], operator: Optional[KubeRayOperator]
    ) -> None:
        run = pod_inputs.run
        settings = run.settings
        labels = dict(rayjob.POD_LABELS)
        head = to_manifest(
            ray_pod_template(pod_inputs, container_name=rayjob.HEAD_CONTAINER, command=None, labels=labels, annotations=annotations)
        )
        worker = to_manifest(
            ray_pod_template(pod_inputs, container_name=rayjob.WORKER_CONTAINER, command=None, labels=labels, annotations=annotations)
        )
        cluster_spec = rayjob.ray_cluster_spec(settings, shape=run.shape, nnodes=run.nnodes, head_template=head, worker_template=worker)
        depends = [operator.release] if operator is not None else []
        cr_opts = pulumi.ResourceOptions(parent=self, depends_on=depends, delete_before_replace=True)
        embedded = settings.workload.rayjob.cluster == "embedded"

        def immutable(paths: tuple[str, ...]) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(cr_opts, pulumi.ResourceOptions(replace_on_changes=list(paths)))

        if not embedded:
            k8s.apiextensions.CustomResource(
                f"{name}-ray-cluster",
                api_version="ray.io/v1",
                kind="RayCluster",
                # a long-lived cluster is what Kueue queues (it ignores a RayJob with a clusterSelector)
                metadata=meta.ObjectMetaArgs(name=rayjob.RAY_CLUSTER_NAME, namespace=namespace, labels={**APP_LABELS, **run_labels(settings)}),
                spec=cluster_spec,
                opts=immutable(rayjob.RAY_CLUSTER_REPLACE_ON_CHANGES),
            )
        runtime_env = rayjob.runtime_env_yaml(pod_inputs.plain_env, trainer_pythonpath(settings, run.launch.env))
        k8s.apiextensions.CustomResource(
            f"{name}-ray-job",
            api_version="ray.io/v1",
            kind="RayJob",
            metadata=meta.ObjectMetaArgs(
                name=rayjob.RAY_EVAL_JOB_NAME if settings.workload.mode == "eval" else rayjob.RAY_JOB_NAME,
                namespace=namespace,
                labels={**APP_LABELS, **(run_labels(settings) if embedded else {})},
                annotations=run_annotations(self.run),
            ),
            spec=rayjob.ray_job_spec(
                settings,
                entrypoint=f"bash {SCRIPTS_DIR}/driver.sh",
                runtime_env=runtime_env,
                cluster_spec=cluster_spec if embedded else None,
            ),
            opts=immutable(rayjob.RAY_JOB_REPLACE_ON_CHANGES),
        )
