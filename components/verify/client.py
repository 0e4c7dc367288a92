"""The one module of verify that talks to a cluster, with the official ``kubernetes`` client:
read what the checks look at into an :class:`~.model.Observed` (the API server's JSON, camelCase,
as ``kubectl get -o json`` shows it), create the objects a level describes, wait for its Jobs,
read each pod's exit status and log, and delete every object it created. No check lives here.

A call that fails is described by :func:`api_failure` (the endpoint, why: refused, timed out, DNS,
TLS, 401, 403, and the OS's or the server's words), as is a kubeconfig whose credential plugin
(``aws eks get-token``) failed so that none were sent; the checks and the command word the remedy
(:func:`rlinf_eks.verify.control_plane.failure_words`). Each call may take ``CONNECT_TIMEOUT``
seconds to connect and ``READ_TIMEOUT`` to be answered, and a failed one is tried once more
(urllib3's default, three more, made a blackholed endpoint take two minutes to say so).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .model import ApiFailure, Observed

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
CONNECT_TIMEOUT, READ_TIMEOUT = 10.0, 30.0
TIMEOUT = (CONNECT_TIMEOUT, READ_TIMEOUT)
"""Seconds to connect, and to be answered, for any one API call (a blackholed endpoint would
otherwise hang for minutes)."""
RETRIES = 1
"""Tries after a failed call's first: a dropped keep-alive connection is tried again once."""


class ClusterError(RuntimeError):
    """No cluster to verify: no kubeconfig, or a kubeconfig whose cluster does not answer."""


def _server_message(err: Any) -> str:
    """The ``message`` of the Status an API server answers with, else its HTTP reason."""
    try:
        body = json.loads(err.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return " ".join(str(message or f"{err.status} {err.reason}").split())


def _innermost(err: BaseException) -> BaseException:
    """urllib3 wraps the cause: MaxRetryError.reason, then the OS's or ssl's own error."""
    for _ in range(5):  # a chain of reasons, never a cycle in practice
        inner = getattr(err, "reason", None)
        if not isinstance(inner, BaseException):
            break
        err = inner
    return err


def api_failure(err: BaseException, endpoint: str, request: str = "") -> Optional[ApiFailure]:
    """What went wrong with an API call, or None when ``err`` is not an API or network error."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError, NameResolutionError, NewConnectionError, SSLError, TimeoutError as Urllib3Timeout

    if isinstance(err, ApiException):
        reason = {401: "unauthorized", 403: "forbidden"}.get(err.status or 0, "error")
        message = _server_message(err)
        return ApiFailure(endpoint, request, reason, message if err.status in (401, 403) else f"{err.status} {message}")  # type: ignore[arg-type]
    if not isinstance(err, (HTTPError, OSError)):
        return None
    inner = _innermost(err)
    words = " ".join(str(inner).split())
    if isinstance(inner, (NameResolutionError, socket.gaierror)):
        return ApiFailure(endpoint, request, "dns", words.split("Failed to resolve ", 1)[-1])
    if isinstance(inner, (SSLError, ssl.SSLError)):
        cause = inner.args[0] if isinstance(inner, SSLError) and inner.args and isinstance(inner.args[0], BaseException) else inner
        verify = getattr(cause, "verify_message", None) or getattr(cause, "reason", None) or str(cause)
        return ApiFailure(endpoint, request, "tls", " ".join(str(verify).split()))
    if isinstance(inner, ConnectionRefusedError) or "Connection refused" in words:
        return ApiFailure(endpoint, request, "refused", "connection refused")
    if isinstance(inner, NewConnectionError):
        return ApiFailure(endpoint, request, "error", words.split("connection: ", 1)[-1])
    # after NewConnectionError, which urllib3 2 derives from ConnectTimeoutError
    if isinstance(inner, (Urllib3Timeout, socket.timeout, TimeoutError)):
        limit = re.search(r"(connect|read) timeout=([0-9.]+)", words)
        return ApiFailure(endpoint, request, "timeout", f"{limit.group(1)} timed out after {limit.group(2)}s" if limit else words)
    return ApiFailure(endpoint, request, "error", f"{type(inner).__name__}: {words}"[:300])


class _Captured(logging.Handler):
    """The messages logged while the kubeconfig loads."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class PodOutcome:
    """One pod of a verify Job: its Job, node, exit status (None: it never finished) and log."""

    job: str
    index: int
    node: str
    exit_code: Optional[int]
    log: str
    reason: str = ""


@dataclass
class Created:
    kind: str
    name: str
    namespace: Optional[str]


@dataclass
class Cluster:
    """A cluster reached through a kubeconfig (``path`` or the client's default: $KUBECONFIG,
    ~/.kube/config) and its ``context``."""

    path: Optional[str] = None
    context: Optional[str] = None
    created: list[Created] = field(default_factory=list)
    timeout: tuple[float, float] = TIMEOUT
    """(connect, read) seconds of every call."""

    def __post_init__(self) -> None:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
        from urllib3.util.retry import Retry

        configuration = client.Configuration()
        # the client logs a failed exec credential plugin (aws eks get-token) and goes on without
        # credentials: kept, to say so instead of the anonymous user's 403s
        captured = _Captured()
        root = logging.getLogger()
        handlers, root.handlers = root.handlers, [captured]
        try:
            config.load_kube_config(config_file=self.path, context=self.context, client_configuration=configuration)
        except (ConfigException, FileNotFoundError, OSError) as err:
            where = self.path or "$KUBECONFIG or ~/.kube/config"
            raise ClusterError(f"no cluster to verify: {where}: {' '.join(str(err).split())}") from None
        except (TypeError, AttributeError, KeyError, IndexError, ValueError):
            # YAML of another shape (a list, a string: --kubeconfig /etc/passwd), on which the client's loader trips
            where = self.path or "$KUBECONFIG or ~/.kube/config"
            raise ClusterError(f"no cluster to verify: {where}: not a kubeconfig (a YAML mapping of clusters, contexts and users, "
                               "as aws eks update-kubeconfig writes it)") from None
        finally:
            root.handlers = handlers
        self.credentials_error = "; ".join(" ".join(line.split()) for line in captured.lines if line.startswith("exec:"))
        self.insecure = configuration.verify_ssl is False
        """The kubeconfig's cluster sets insecure-skip-tls-verify: the command says so once
        (:attr:`insecure_warning`), instead of urllib3's multi-line warning on every request."""
        if self.insecure:
            import warnings
            from urllib.parse import urlsplit

            from urllib3.exceptions import InsecureRequestWarning

            # this cluster's requests only: the filter names its host
            host = urlsplit(str(configuration.host)).hostname or ""
            warnings.filterwarnings("ignore", message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
                                    category=InsecureRequestWarning)  # fmt: skip
        configuration.retries = Retry(total=RETRIES, backoff_factor=0)
        self.endpoint = str(configuration.host)
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.extensions = client.ApiextensionsV1Api(self.api)
        self.auth = client.AuthenticationV1Api(self.api)
        self.version = client.VersionApi(self.api)
        self.networking = client.NetworkingV1Api(self.api)

    @property
    def insecure_warning(self) -> str:
        """The one line saying that the cluster's certificate goes unchecked ('' when it is checked)."""
        if not self.insecure:
            return ""
        return (f"{self.endpoint}: the kubeconfig sets insecure-skip-tls-verify: true, so its certificate is not checked "
                "(anyone on the way could answer as the cluster); put its CA in certificate-authority-data instead "
                "(aws eks update-kubeconfig writes it)")  # fmt: skip

    # -- reading -------------------------------------------------------------------------------

    def _json(self, obj: Any) -> Any:
        return self.api.sanitize_for_serialization(obj)

    def _items(self, listing: Any) -> list[dict[str, Any]]:
        return list(self._json(listing).get("items") or [])

    def _custom(self, plural: str, namespace: Optional[str] = None) -> list[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        try:
            if namespace:
                found = self.custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, plural, _request_timeout=self.timeout)
            else:
                found = self.custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status == 404:  # Kueue not installed: the L0 CRD check says so
                return []
            raise
        return list(found.get("items") or [])

    def observe_control_plane(self) -> Observed:
        """/version, the caller (SelfSubjectReview) and the CRDs. The first call that fails is
        kept as ``api_failure`` (an API that does not answer also leaves ``server_version`` None;
        credentials refused or a user without rights, ``identity`` or the CRDs): the checks say why."""
        observed = Observed()
        try:
            observed.server_version = self._json(self.version.get_code(_request_timeout=self.timeout))
        except Exception as err:  # noqa: BLE001 - classified; anything else is not the cluster's answer
            observed.api_failure = self._failure(err, "GET /version")
            return observed
        if self.credentials_error:  # it answers anyone; what follows would be the anonymous user's 403s
            observed.api_failure = ApiFailure(self.endpoint, "the kubeconfig's exec credential plugin", "credentials", self.credentials_error)
            return observed
        try:
            review = self.auth.create_self_subject_review(
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, _request_timeout=self.timeout
            )
            observed.identity = self._json(review)
        except Exception as err:  # noqa: BLE001 - as above
            observed.api_failure = self._failure(err, "create selfsubjectreviews")
            if observed.api_failure.reason not in ("forbidden", "error"):  # 403/404: an API server that has no review for this user
                return observed
            observed.api_failure = None
        try:
            observed.crds = self._items(self.extensions.list_custom_resource_definition(_request_timeout=self.timeout))
        except Exception as err:  # noqa: BLE001 - as above
            observed.api_failure = self._failure(err, "list customresourcedefinitions")
        return observed

    def _failure(self, err: Exception, request: str) -> ApiFailure:
        """``err`` as an ApiFailure of this endpoint; an error that is neither the API's nor the
        network's is re-raised (a bug, not the cluster's answer)."""
        failure = api_failure(err, self.endpoint, request)
        if failure is None:
            raise err
        return failure

    def observe(self, observed: Observed, level: int, namespaces: list[str]) -> Observed:
        """Add what ``level`` reads to ``observed``."""
        if level >= 1 and not observed.nodes:
            observed.nodes = self._items(self.core.list_node(_request_timeout=self.timeout))
        if level in (2, 5) and not observed.pods:
            observed.pods = self._items(self.core.list_pod_for_all_namespaces(_request_timeout=self.timeout))
        if level == 2:
            observed.daemonsets = self._items(self.apps.list_daemon_set_for_all_namespaces(_request_timeout=self.timeout))
            observed.deployments = self._items(self.apps.list_deployment_for_all_namespaces(_request_timeout=self.timeout))
            observed.namespaces = self._items(self.core.list_namespace(_request_timeout=self.timeout))
            observed.cluster_queues = self._custom("clusterqueues")
            observed.local_queues = [q for ns in namespaces for q in self._custom("localqueues", ns)]
            observed.service_accounts = [sa for ns in namespaces for sa in self._items(self.core.list_namespaced_service_account(ns, _request_timeout=self.timeout))]
            observed.claims = [c for ns in namespaces for c in self._items(self.core.list_namespaced_persistent_volume_claim(ns, _request_timeout=self.timeout))]
        if level == 5:
            observed.cluster_queues = observed.cluster_queues or self._custom("clusterqueues")
            observed.priority_classes = self._custom("workloadpriorityclasses")
        return observed

    # -- the objects of a level ------------------------------------------------------------------

    def ensure_namespace(self, name: str, labels: dict[str, str]) -> None:
        """Create the namespace (remembered for clean-up), or use the one there; one still being
        deleted by an earlier verify is waited for (a minute) and created anew."""
        from kubernetes.client.exceptions import ApiException

        for _ in range(30):
            try:
                phase = (self._json(self.core.read_namespace(name, _request_timeout=self.timeout)).get("status") or {}).get("phase")
            except ApiException:
                break
            if phase != "Terminating":
                return
            time.sleep(2)
        try:
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        except ApiException as err:
            if err.status == 403:  # a user who may not create namespaces: an admin makes it beforehand
                raise ClusterError(f"may not create the namespace {name}: have an admin create it (verify --dry-run writes it)") from None
            if err.status != 409:
                raise
            return
        self.created.append(Created("Namespace", name, None))

    def apply(self, objects: list[dict[str, Any]]) -> None:
        """Create every object (ConfigMap, Service, NetworkPolicy, Job), remembering each."""
        creators: dict[str, Callable[..., Any]] = {
            "ConfigMap": self.core.create_namespaced_config_map,
            "Service": self.core.create_namespaced_service,
            "NetworkPolicy": self.networking.create_namespaced_network_policy,
            "Job": self.batch.create_namespaced_job,
        }
        for obj in objects:
            meta = obj["metadata"]
            creators[obj["kind"]](meta["namespace"], obj, _request_timeout=self.timeout)
            self.created.append(Created(obj["kind"], meta["name"], meta["namespace"]))

    def wait(self, namespace: str, run_label: str, jobs: list[str], deadline: float, progress: Callable[[str], None]) -> list[PodOutcome]:
        """Wait until every Job of ``jobs`` finished or ``deadline`` (time.monotonic()) passed;
        then each pod's outcome (a pod that never finished: exit None, with the scheduler's
        reason when it was never placed)."""
        started = time.monotonic()
        while True:
            done = 0
            for name in jobs:
                status = self._json(self.batch.read_namespaced_job_status(name, namespace, _request_timeout=self.timeout)).get("status") or {}
                if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in status.get("conditions") or []):
                    done += 1
            progress(f"{done}/{len(jobs)} Jobs finished ({time.monotonic() - started:.0f}s)")
            if done == len(jobs) or time.monotonic() > deadline:
                break
            time.sleep(2)
        return self._outcomes(namespace, run_label, jobs)

    def _outcomes(self, namespace: str, run_label: str, jobs: list[str]) -> list[PodOutcome]:
        from kubernetes.client.exceptions import ApiException

        outcomes = []
        for pod in self._items(self.core.list_namespaced_pod(namespace, label_selector=run_label, _request_timeout=self.timeout)):
            meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
            job = (meta.get("labels") or {}).get("job-name", "")
            if job not in jobs:
                continue
            index = int((meta.get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", "0") or 0)
            exit_code, reason = None, ""
            for container in status.get("containerStatuses") or []:
                terminated = (container.get("state") or {}).get("terminated")
                if terminated:
                    exit_code = terminated.get("exitCode")
            if exit_code is None:
                waiting = next(((c.get("state") or {}).get("waiting") for c in status.get("containerStatuses") or [] if (c.get("state") or {}).get("waiting")), None)
                reason = next((c.get("message", "") for c in status.get("conditions") or [] if c.get("type") == "PodScheduled" and c.get("status") == "False"), "")
                reason = reason or (f"{waiting.get('reason')}: {waiting.get('message', '')}" if waiting else "")
            try:
                log = self.core.read_namespaced_pod_log(meta["name"], namespace, tail_lines=400, _request_timeout=self.timeout) if exit_code is not None else ""
            except ApiException:
                log = ""
            outcomes.append(PodOutcome(job, index, spec.get("nodeName") or "", exit_code, log, reason))
        return outcomes

    def clean_up(self) -> list[str]:
        """Delete every object this run created, newest first (a namespace takes what is in it);
        returns what could not be deleted."""
        from kubernetes.client.exceptions import ApiException

        deleters: dict[str, Callable[..., Any]] = {
            "ConfigMap": self.core.delete_namespaced_config_map,
            "Service": self.core.delete_namespaced_service,
            "NetworkPolicy": self.networking.delete_namespaced_network_policy,
            "Job": lambda name, ns: self.batch.delete_namespaced_job(name, ns, propagation_policy="Background"),
        }
        left = []
        for item in reversed(self.created):
            where = f"{item.kind} {item.namespace + '/' if item.namespace else ''}{item.name}"
            try:
                if item.kind == "Namespace":
                    self.core.delete_namespace(item.name, _request_timeout=self.timeout)
                else:
                    deleters[item.kind](item.name, item.namespace)
            except ApiException as err:
                if err.status != 404:
                    left.append(f"{where} ({err.status})")
            except Exception as err:  # noqa: BLE001 - a network error must not stop the other deletes
                left.append(f"{where} ({type(err).__name__})")
        self.created.clear()
        return left
