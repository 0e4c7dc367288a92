"""L0, the control plane: the API server answers, runs the stack's Kubernetes minor, knows who is
asking, and serves every CRD the stack's objects need (present and Established).

Checks: ``api.reachable``, ``api.version``, ``api.identity``, then ``crds.<release>`` per Helm
release whose CRDs the stack uses (``crds.kueue``, ``crds.jobset``, ``crds.kuberay-operator``,
``crds.kps``).

A failed call (:class:`~.model.ApiFailure`, here or on a level above) is worded by
:func:`failure_words`: the endpoint, why (connection refused, timed out, a name that does not
resolve, an untrusted certificate, 401, 403) and what to do about it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from .expect import CrdExpectation, Expectation, Release
from .model import ApiFailure, CheckResult, Observed, failed, passed, skipped

LEVEL = 0


def server_minor(version: Mapping[str, Any]) -> Optional[str]:
    """``major.minor`` of a /version answer: EKS reports ``minor: "35+"`` and
    ``gitVersion: "v1.35.2-eks-..."``; the digits of major and minor, else those of gitVersion."""
    major = re.match(r"\d+", str(version.get("major") or ""))
    minor = re.match(r"\d+", str(version.get("minor") or ""))
    if major and minor:
        return f"{major.group()}.{minor.group()}"
    git = re.match(r"v?(\d+)\.(\d+)", str(version.get("gitVersion") or ""))
    return f"{git.group(1)}.{git.group(2)}" if git else None


def user_info(identity: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The userInfo of a SelfSubjectReview, given as the review, its status, or the userInfo itself."""
    if not identity:
        return {}
    if isinstance(identity.get("status"), Mapping):
        identity = identity["status"]
    if isinstance(identity.get("userInfo"), Mapping):
        return identity["userInfo"]
    return identity


def condition(obj: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    """The status condition of type ``kind`` of an API object, or None."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(item, Mapping) and item.get("type") == kind:
            return item
    return None


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and str(found.get("status")) == "True"


def why_not(obj: Mapping[str, Any], kind: str) -> str:
    """``<kind>=<status> (<reason>: <message>)`` for a condition that is not True, or "no <kind> condition"."""
    found = condition(obj, kind)
    if found is None:
        return f"no {kind} condition"
    reason = ": ".join(str(found[k]) for k in ("reason", "message") if found.get(k))
    return f"{kind}={found.get('status')}" + (f" ({_one_line(reason)})" if reason else "")


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _kubeconfig_command(expect: Expectation) -> str:
    return f"pulumi stack output kubeconfig --show-secrets --stack {expect.platform_stack or expect.stack} > kubeconfig"


def failure_words(expect: Expectation, failure: ApiFailure) -> tuple[str, str]:
    """(what happened, what to do) for a failed API call, each one line."""
    at, asked = failure.endpoint, f" ({failure.request})" if failure.request else ""
    fetch = f"fetch the stack's kubeconfig again: {_kubeconfig_command(expect)}"
    words = {
        "refused": (
            f"{at} refused the connection{asked}: nothing listens there",
            f"the kubeconfig names an endpoint of a cluster that is gone or not up yet: {fetch}",
        ),
        "timeout": (
            f"no answer from {at}{asked}: {failure.message}",
            "it took the connection but never answered: an overloaded control plane (aws eks describe-cluster) or not an API "
            f"server behind that address and port: {fetch}"
            if failure.message.startswith("read")
            else "this machine cannot reach the endpoint: add its address to cluster.endpointPublicAccessCidrs and pulumi up, "
            "or run verify inside the VPC (a private endpoint)",
        ),
        "dns": (
            f"the endpoint {at} does not resolve{asked}: {failure.message}",
            f"the cluster was deleted or the kubeconfig is stale: {fetch}",
        ),
        "tls": (
            f"{at}'s certificate is not trusted{asked}: {failure.message}",
            f"the kubeconfig's certificate-authority-data is not this server's (an earlier cluster of the same name?): {fetch}",
        ),
        "credentials": (
            f"no credentials were sent to {at}: {failure.request} failed: {failure.message}",
            "run the kubeconfig's command by hand (aws eks get-token --cluster-name NAME) until it prints a token: "
            "aws configure or aws sso login, the AWS_PROFILE the kubeconfig sets, the aws CLI on PATH",
        ),
        "unauthorized": (
            f"{at} refused the credentials{asked}: 401 {failure.message}",
            "the token is expired or of an identity the cluster does not know: check aws sts get-caller-identity (the profile "
            "the kubeconfig's aws eks get-token uses) and that identity's EKS access entry (cluster.adminRoleArns)",
        ),
        "forbidden": (
            f"{at} forbids it{asked}: 403 {failure.message}",
            f"the user lacks the rights verify needs: bind the ClusterRole and Roles that python -m rlinf_eks verify {expect.stack} "
            "--dry-run writes (or add the identity to cluster.adminRoleArns)",
        ),
    }
    return words.get(
        failure.reason,
        (f"{at} answered{asked}: {failure.message}", f"check that {at} is the stack's API server: {fetch}"),
    )


def _reachable(expect: Expectation, observed: Observed) -> CheckResult:
    version = observed.server_version
    if not version or not (version.get("gitVersion") or version.get("minor")):
        if observed.api_failure is not None:
            return failed(LEVEL, "api.reachable", *failure_words(expect, observed.api_failure))
        return failed(
            LEVEL, "api.reachable", "no answer from the API server (/version)",
            f"check the kubeconfig ({_kubeconfig_command(expect)}) "
            "and that this machine may reach the endpoint (cluster.endpointPublicAccessCidrs, or run inside the VPC)",
        )  # fmt: skip
    return passed(LEVEL, "api.reachable", f"the API server answers: {version.get('gitVersion') or version.get('minor')}")


def _version(expect: Expectation, version: Mapping[str, Any]) -> CheckResult:
    running = server_minor(version)
    wanted = expect.kubernetes_minor
    shown = version.get("gitVersion") or f"{version.get('major')}.{version.get('minor')}"
    if running is None:
        return failed(LEVEL, "api.version", f"cannot read the server's version from {dict(version)!r:.120}", "check that the endpoint is a Kubernetes API server")
    if running == wanted:
        return passed(LEVEL, "api.version", f"Kubernetes {running} ({shown}), as cluster.kubernetesVersion says")
    older = tuple(map(int, running.split("."))) < tuple(map(int, wanted.split(".")))
    remedy = (
        f"{expect.up_cluster} to upgrade the control plane to {wanted} (EKS upgrades one minor at a time), "
        f"or set cluster.kubernetesVersion: '{running}'"
        if older
        else f"set cluster.kubernetesVersion: '{running}' (EKS cannot downgrade) and {expect.up_cluster}"
    )
    return failed(LEVEL, "api.version", f"the cluster runs Kubernetes {running} ({shown}), the stack says cluster.kubernetesVersion {wanted}", remedy)


def _identity(expect: Expectation, observed: Observed) -> CheckResult:
    info = user_info(observed.identity)
    username = info.get("username")
    if observed.api_failure is not None:  # no credentials, credentials refused (401), or a user who may not list CRDs (403)
        detail, remedy = failure_words(expect, observed.api_failure)
        return failed(LEVEL, "api.identity", f"as {username}: {detail}" if username else detail, remedy)
    if not username:
        return failed(
            LEVEL, "api.identity", "the API server names no user for these credentials (SelfSubjectReview)",
            "check the kubeconfig's user (aws eks get-token with the right AWS profile) and its EKS access entry (cluster.adminRoleArns)",
        )  # fmt: skip
    groups = [g for g in info.get("groups") or [] if g != "system:authenticated"]
    return passed(LEVEL, "api.identity", f"as {username}" + (f" (groups {', '.join(groups)})" if groups else ""))


def _crd_remedy(expect: Expectation, release: Release) -> str:
    if release.crds_first_install_only:
        return (
            f"Helm installs chart {release.chart} {release.version}'s crds/ on the first install only: "
            f"kubectl apply --server-side its CRDs, then {expect.up_cluster}"
        )
    return f"{expect.up_cluster}: the {release} installs them (helm status {release.name} -n {release.namespace})"


def _crds(expect: Expectation, observed: Observed) -> list[CheckResult]:
    by_release: dict[str, list[CrdExpectation]] = {}
    for crd in expect.crds:
        by_release.setdefault(crd.release.name, []).append(crd)
    served = {_name(crd): crd for crd in observed.crds}
    results = []
    for name, crds in by_release.items():
        release = crds[0].release
        missing = [c.name for c in crds if c.name not in served]
        not_established = [f"{c.name} {why_not(served[c.name], 'Established')}" for c in crds if c.name in served and not condition_true(served[c.name], "Established")]
        check = f"crds.{name}"
        if missing or not_established:
            problems = ([f"missing: {', '.join(missing)}"] if missing else []) + ([f"not Established: {'; '.join(not_established)}"] if not_established else [])
            results.append(failed(LEVEL, check, f"{release.what}: " + "; ".join(problems), _crd_remedy(expect, release)))
        else:
            plural = "CRDs" if len(crds) > 1 else "CRD"
            results.append(passed(LEVEL, check, f"{len(crds)} {plural} of {release.what} Established: {', '.join(c.name.split('.')[0] for c in crds)}"))
    return results


def check_control_plane(expect: Expectation, observed: Observed) -> list[CheckResult]:
    """L0: reachable, the stack's Kubernetes minor, a known identity, every CRD Established."""
    reachable = _reachable(expect, observed)
    if not reachable.ok:
        names = ["api.version", "api.identity", *dict.fromkeys(f"crds.{c.release.name}" for c in expect.crds)]
        return [reachable, *(skipped(LEVEL, name, "the API server did not answer (api.reachable)") for name in names)]
    assert observed.server_version is not None
    checks = [reachable, _version(expect, observed.server_version), _identity(expect, observed)]
    if observed.api_failure is not None:
        why = f"could not read the CRDs ({observed.api_failure.reason}: api.identity)"
        return checks + [skipped(LEVEL, name, why) for name in dict.fromkeys(f"crds.{c.release.name}" for c in expect.crds)]
    return checks + _crds(expect, observed)
