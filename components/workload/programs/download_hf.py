import inspect
import os

from huggingface_hub import snapshot_download

kwargs = {"repo_id": os.environ["HF_REPO"], "revision": os.environ.get("HF_REVISION") or None, "local_dir": os.environ["MODEL_DIR"]}
if os.environ.get("HF_REPO_TYPE"):
    kwargs["repo_type"] = os.environ["HF_REPO_TYPE"]  # a dataset
path = os.environ.get("HF_PATH")
if path:
    # one file or folder of the repository: the file itself, or everything below the folder
    kwargs["allow_patterns"] = [path, f"{path}/*"]
# huggingface_hub < 0.23 symlinks large files into ~/.cache, which dies with this container
if "local_dir_use_symlinks" in inspect.signature(snapshot_download).parameters:
    kwargs["local_dir_use_symlinks"] = False
snapshot_download(**kwargs)
if path and not os.path.exists(os.path.join(os.environ["MODEL_DIR"], path)):
    raise SystemExit(f"{os.environ['MODEL_SOURCE']}: the repository has no {path}")
