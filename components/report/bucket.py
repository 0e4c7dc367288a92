"""``report --from-bucket``: copy a run's logs (not its checkpoints) from S3.

Without the shared filesystem the pods sync the run directory to ``s3://<bucket>/<prefix>/``
(``<stack>`` or ``<stack>-runs/<runName>``, :func:`rlinf_eks.workload.run.run_paths`); with it,
the FSx data repository association exports the same directory to the same prefix. Only what the
report reads comes down: TensorBoard event files, veRL ``run_*.log`` files, evaluation summaries
(``eval.json``) and videos (``*.mp4``); nothing inside a ``global_step_<N>`` folder (weights).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["BucketError", "download_logs", "wanted"]

_CHECKPOINT_PART = re.compile(r"^global_step_\d+$")


class BucketError(Exception):
    """The bucket or prefix cannot be read (a clear line for the command, exit 2)."""


def wanted(relative: str) -> bool:
    """Whether a key (relative to the run's prefix) is a log the report reads."""
    path = PurePosixPath(relative)
    if ".." in path.parts or any(_CHECKPOINT_PART.match(part) for part in path.parts[:-1]):
        return False
    name = path.name
    return (
        name.startswith("events.out.tfevents.")
        or (name.startswith("run_") and name.endswith(".log"))
        or (name == "eval.json" and "eval" in path.parts)
        or name.endswith(".mp4")
    )


def download_logs(client: Any, bucket: str, prefix: str, dest: Path) -> list[str]:
    """Copy the wanted objects below ``s3://bucket/prefix/`` into ``dest``; the keys copied.
    ``client``: a boto3 S3 client. Raises BucketError for an API error or an empty prefix."""
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = prefix.strip("/") + "/"
    copied: list[str] = []
    seen = 0
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                seen += 1
                relative = item["Key"][len(prefix):]
                if not relative or not wanted(relative):
                    continue
                target = dest / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"]
                target.write_bytes(body.read())
                copied.append(item["Key"])
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "error")
        raise BucketError(f"s3://{bucket}/{prefix}: {code}: {err.response.get('Error', {}).get('Message', '')}".rstrip(": ")) from None
    except BotoCoreError as err:
        raise BucketError(f"s3://{bucket}/{prefix}: {err}") from None
    if not seen:
        raise BucketError(f"s3://{bucket}/{prefix} holds no objects: is this the stack's checkpoint bucket, and has the run synced yet?")
    return copied
