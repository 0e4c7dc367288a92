"""What ``pulumi destroy`` does with the resources that hold data: the ones it keeps (``protect``,
``retainOnDelete``: the checkpoint bucket, FSx) and the ones it empties before deleting them
(a bucket's ``forceDestroy``, a repository's ``forceDelete``: the build contexts, the training
images). The plan prints it under ``Destroy:``; docs/deploying.md says how to destroy."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

_EMPTIED = {"aws:s3/bucket:Bucket": "forceDestroy", "aws:ecr/repository:Repository": "forceDelete"}
_WHAT = {
    "aws:s3/bucket:Bucket": ("bucket", "every object version", "build-image uploads a context again"),
    "aws:ecr/repository:Repository": ("image repository", "its images", "build-image builds them again"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("file system", "", ""),
}


def _what(resource: Mapping[str, Any]) -> str:
    return _WHAT.get(resource["type"], (resource["type"],))[0]


def destroy_lines(resources: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``Destroy:`` section: one line per resource destroy keeps or empties ([] when none)."""
    resources = list(resources)
    lines = []
    for r in resources:
        options = r.get("options") or {}
        flags = [f for f in ("protect", "retainOnDelete") if options.get(f)]
        if flags:
            lines.append(
                f"  keeps {_what(r)} {r['name']} ({' and '.join(flags)}): `pulumi destroy --exclude-protected` leaves it; "
                "unprotected and destroyed, Pulumi forgets it and it stays in AWS"
            )
    for r in resources:
        key = _EMPTIED.get(r["type"])
        if key and (r.get("inputs") or {}).get(key) is True and not (r.get("options") or {}).get("protect"):
            kind, contents, again = _WHAT[r["type"]]
            lines.append(f"  deletes {kind} {r['name']} with {contents} ({key}): {again}")
    return ["Destroy (docs/deploying.md):", *lines] if lines else []
