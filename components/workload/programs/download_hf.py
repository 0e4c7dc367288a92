import inspect
import os

from huggingface_hub import snapshot_download

kwargs = {"repo_id": os.environ["HF_REPO"], "revision": os.environ.get("HF_REVISION") or None, "local_dir": os.environ["MODEL_DIR"]}
# huggingface_hub < 0.23 symlinks large files into ~/.cache, which dies with this container
if "local_dir_use_symlinks" in inspect.signature(snapshot_download).parameters:
    kwargs["local_dir_use_symlinks"] = False
snapshot_download(**kwargs)
