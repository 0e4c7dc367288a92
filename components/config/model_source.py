"""Where a model may come from (``workload.model.source``): a Hugging Face repository or an S3
prefix, parsed into a ModelSource."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

from .errors import suggestion

# Hugging Face repo ids: "Org/Name", letters,
# digits, "-", "_", "." (huggingface_hub validate_repo_id: no "--" or "..", at most 96 characters).
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_HF_SOURCE = re.compile(rf"hf://(?P<repo>{_HF_PART}/{_HF_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._/-]*))?")
# S3 general purpose bucket names (S3 user guide, "Bucket naming rules"): 3-63 characters of
# lowercase letters, digits, "." and "-", starting and ending with a letter or digit.
_S3_SOURCE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?")
MODEL_SOURCE_FORMS = "hf://Org/Name, hf://Org/Name@revision (a branch, tag or commit) or s3://bucket/prefix"


@dataclass(frozen=True)
class ModelSource:
    """A parsed ``workload.model.source``: a Hugging Face repository (``repo``, ``revision``) or
    an S3 prefix (``bucket``, ``prefix``)."""

    uri: str
    kind: Literal["hf", "s3"]
    repo: str = ""
    revision: Optional[str] = None
    bucket: str = ""
    prefix: str = ""

    @property
    def relative_dir(self) -> str:
        """Where below the models folder it is staged: one folder per source, so a changed source
        is never mistaken for an already staged one."""
        if self.kind == "hf":
            pinned = f"@{self.revision.replace('/', '_')}" if self.revision else ""
            return f"hf/{self.repo}{pinned}"
        return f"s3/{self.bucket}/{self.prefix}" if self.prefix else f"s3/{self.bucket}"


def parse_model_source(uri: str) -> ModelSource:
    """``hf://Org/Name[@revision]`` or ``s3://bucket/prefix``; ValueError says what is wrong."""
    hf = _HF_SOURCE.fullmatch(uri)
    if hf:
        repo = hf.group("repo")
        if "--" in repo or ".." in repo or len(repo.split("/")[1]) > 96:
            raise ValueError(f"{repo!r} is not a Hugging Face repo id (no '--' or '..', names of at most 96 characters)")
        revision = hf.group("revision")
        if revision is not None and (".." in revision or revision.endswith("/")):
            raise ValueError(f"{revision!r} is not a branch, tag or commit")
        return ModelSource(uri, "hf", repo=repo, revision=revision)
    s3 = _S3_SOURCE.fullmatch(uri)
    if s3:
        bucket, prefix = s3.group("bucket"), (s3.group("prefix") or "").strip("/")
        if ".." in bucket or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
            raise ValueError(f"{bucket!r} is not an S3 bucket name")
        parts = prefix.split("/") if prefix else []
        if any(part in ("", ".", "..") for part in parts) or not all(re.fullmatch(r"[\w!.*'()+=@,-]+", p) for p in parts):
            raise ValueError(f"{prefix!r} is not a plain S3 prefix (folders of letters, digits and -_.!*'()+=@, separated by single '/')")
        return ModelSource(uri, "s3", bucket=bucket, prefix=prefix)
    hint = ""
    match = re.fullmatch(r"https://huggingface\.co/([^/]+/[^/?#]+)/?", uri)
    if match:
        hint = suggestion(f"hf://{match.group(1)}")
    elif re.fullmatch(_HF_PART + "/" + _HF_PART, uri):
        hint = suggestion(f"hf://{uri}")
    elif uri.startswith("s3://"):
        hint = " (an S3 bucket name is 3 to 63 lowercase letters, digits, '.' and '-')"
    elif uri.startswith("/"):
        hint = " (a path inside the image is workload.trainer.modelPath)"
    raise ValueError(f"not a model source{hint}")
