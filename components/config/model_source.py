"""Where a trainer input may come from (``workload.model.source``, ``workload.inputs.<name>``): a
Hugging Face model or dataset repository (optionally one file or folder of it) or an S3 prefix,
parsed into a ModelSource."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

from .errors import suggestion

# Hugging Face repo ids: "Org/Name", letters,
# digits, "-", "_", "." (huggingface_hub validate_repo_id: no "--" or "..", at most 96 characters).
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_HF_SOURCE = re.compile(rf"hf://(?P<repo>{_HF_PART}/{_HF_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._/-]*))?")
# Datasets, in huggingface_hub's HfFileSystem form: hf://datasets/Org/Name[@revision][/path in the
# repo]; a revision here has no "/" (the path follows it), as HfFileSystem asks of unencoded ones.
_HF_DATASET = re.compile(
    rf"hf://datasets/(?P<repo>{_HF_PART}/{_HF_PART})(?:@(?P<revision>[A-Za-z0-9][A-Za-z0-9._-]*))?(?:/(?P<path>.*))?"
)
# S3 general purpose bucket names (S3 user guide, "Bucket naming rules"): 3-63 characters of
# lowercase letters, digits, "." and "-", starting and ending with a letter or digit.
_S3_SOURCE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?")
_PLAIN_PART = re.compile(r"[\w!.*'()+=@,-]+")
MODEL_SOURCE_FORMS = "hf://Org/Name, hf://Org/Name@revision (a branch, tag or commit) or s3://bucket/prefix"
INPUT_SOURCE_FORMS = (
    "hf://Org/Name[@revision] (a model), hf://datasets/Org/Name[@revision][/file or folder] (a dataset), "
    "s3://bucket/prefix, or an absolute path in the pod (not staged)"
)


@dataclass(frozen=True)
class ModelSource:
    """A parsed source: a Hugging Face repository (``repo``, ``repo_type``, ``revision`` and, for
    a dataset, a ``path`` inside it) or an S3 prefix (``bucket``, ``prefix``)."""

    uri: str
    kind: Literal["hf", "s3"]
    repo: str = ""
    revision: Optional[str] = None
    bucket: str = ""
    prefix: str = ""
    repo_type: Literal["model", "dataset"] = "model"
    path: str = ""
    """Hugging Face datasets: the file or folder of the repository the input is (empty: all of it)."""

    @property
    def relative_dir(self) -> str:
        """Where below the inputs folder it is staged: one folder per source, so a changed source
        is never mistaken for an already staged one."""
        if self.kind == "hf":
            pinned = f"@{self.revision.replace('/', '_')}" if self.revision else ""
            kind = "datasets/" if self.repo_type == "dataset" else ""
            return f"hf/{kind}{self.repo}{pinned}"
        return f"s3/{self.bucket}/{self.prefix}" if self.prefix else f"s3/{self.bucket}"


def _plain_path(path: str, what: str) -> str:
    parts = path.split("/") if path else []
    if any(part in ("", ".", "..") for part in parts) or not all(_PLAIN_PART.fullmatch(p) for p in parts):
        raise ValueError(f"{path!r} is not a plain {what} (folders of letters, digits and -_.!*'()+=@, separated by single '/')")
    return path


def _repo(repo: str) -> str:
    if "--" in repo or ".." in repo or len(repo.split("/")[1]) > 96:
        raise ValueError(f"{repo!r} is not a Hugging Face repo id (no '--' or '..', names of at most 96 characters)")
    return repo


def parse_model_source(uri: str) -> ModelSource:
    """``hf://Org/Name[@revision]``, ``hf://datasets/Org/Name[@revision][/path]`` or
    ``s3://bucket/prefix``; ValueError says what is wrong."""
    dataset = _HF_DATASET.fullmatch(uri)
    if dataset:
        path = _plain_path((dataset.group("path") or "").strip("/"), "path in the dataset")
        return ModelSource(uri, "hf", repo=_repo(dataset.group("repo")), revision=dataset.group("revision"), repo_type="dataset", path=path)
    hf = None if uri.startswith("hf://datasets/") else _HF_SOURCE.fullmatch(uri)
    if hf:
        repo = _repo(hf.group("repo"))
        revision = hf.group("revision")
        if revision is not None and (".." in revision or revision.endswith("/")):
            raise ValueError(f"{revision!r} is not a branch, tag or commit")
        return ModelSource(uri, "hf", repo=repo, revision=revision)
    s3 = _S3_SOURCE.fullmatch(uri)
    if s3:
        bucket, prefix = s3.group("bucket"), (s3.group("prefix") or "").strip("/")
        if ".." in bucket or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
            raise ValueError(f"{bucket!r} is not an S3 bucket name")
        return ModelSource(uri, "s3", bucket=bucket, prefix=_plain_path(prefix, "S3 prefix"))
    hint = ""
    match = re.fullmatch(r"https://huggingface\.co/(datasets/)?([^/]+/[^/?#]+)/?", uri)
    if match:
        hint = suggestion(f"hf://{match.group(1) or ''}{match.group(2)}")
    elif re.fullmatch(_HF_PART + "/" + _HF_PART, uri):
        hint = suggestion(f"hf://{uri}")
    elif uri.startswith("hf://datasets/"):
        hint = " (a dataset is hf://datasets/Org/Name, then @revision and /path in it if any)"
    elif uri.startswith("s3://"):
        hint = " (an S3 bucket name is 3 to 63 lowercase letters, digits, '.' and '-')"
    elif uri.startswith("/"):
        hint = " (a path inside the image is workload.trainer.modelPath)"
    raise ValueError(f"not a model source{hint}")
