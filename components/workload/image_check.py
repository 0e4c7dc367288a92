"""The image check: the first init container of every Ray pod (after the restart backoff), in the
training image, checks the image contract (:mod:`.image_contract`) before the fabric check, the
preflight, the model staging and the Ray join wait. A broken image fails the pod in seconds with
``exit_codes.IMAGE_BROKEN`` and one line naming what is missing and what to do; the manual
launcher's failure rules stop there (a restart cannot fix an image)."""

from __future__ import annotations

import re

from . import exit_codes, scripts
from .image_contract import EFA_TOOLS, ImageContract
from .kube import IMAGE_CHECK_CONTAINER, check_container, core

IMAGE_CHECK_SCRIPT = "image-check.sh"
CONTAINER = IMAGE_CHECK_CONTAINER

IMAGE_CHECK = scripts.body(IMAGE_CHECK_SCRIPT)
REFUSED_ENV_CHECK = scripts.body("image-check-env.sh")
"""First, where the trainer refuses some environment at startup (the contract's ``refused_env``):
the image's own ENV must not set it."""

# Without EFA (a node type that has none, gpuNodes.efa false) the check neither looks for libfabric
# and aws-ofi-nccl nor puts the EFA installer's bin folder on PATH: none of it is in such an
# image's contract. Both parts are cut out of the one body, which an EFA stack renders whole.
_EFA_PATH = 'export PATH="/opt/amazon/efa/bin:${PATH}"\n'
_EFA_BLOCK = re.compile(r'^if \[ "\$\{EFA\}" = 1 \]; then\n.*?^fi\n', re.S | re.M)
IMAGE_CHECK_WITHOUT_EFA = _EFA_BLOCK.sub('plugin=""\n', IMAGE_CHECK.replace(_EFA_PATH, "", 1), count=1)
assert _EFA_PATH not in IMAGE_CHECK_WITHOUT_EFA and "fi_info" not in IMAGE_CHECK_WITHOUT_EFA, "sh/image-check.sh: its EFA part moved"


def image_check_script(contract: ImageContract, *, root: str = "") -> str:
    """``root``: a directory standing for the image's / (tests run the script against fake image
    roots); empty in the pods."""
    efa = (
        {"EFA": int(contract.efa), "PLUGIN_DIRS": " ".join(root + d for d in contract.plugin_dirs)} if contract.efa else {}
    )
    return scripts.render(
        {
            "IMAGE": contract.image,
            "DIALECT": contract.dialect,
            "DOCKERFILE": contract.dockerfile,
            # the EFA tools get their own messages below
            "TOOLS": " ".join(t for t in contract.tools if t not in EFA_TOOLS),
            "PYTHON_MODULES": " ".join(contract.python_modules),
            "TRAINER_MODULES": " ".join(contract.trainer_modules),
            "CONFIG_NAME": contract.config_name,
            "RAY_VERSION": contract.ray_version,
            "WORKDIR": root + contract.workdir,
            "ENTRY_SCRIPT": root + contract.entry_script,
            "CONFIG_DIR": root + contract.config_dir,
            **efa,
            "EXIT_IMAGE_BROKEN": exit_codes.IMAGE_BROKEN,
            # NAME=text pairs: a variable whose value holds text kills the trainer at startup
            **({"REFUSED_ENV": " ".join(f"{name}={contains}" for name, contains, _ in contract.refused_env)} if contract.refused_env else {}),
        },
        (REFUSED_ENV_CHECK if contract.refused_env else "") + (IMAGE_CHECK if contract.efa else IMAGE_CHECK_WITHOUT_EFA),
    )


def image_check_container(image: str, *, env: list[core.EnvVarArgs]) -> core.ContainerArgs:
    """The training image's environment (LD_LIBRARY_PATH, PYTHONPATH), no devices: it only looks
    at files and imports the trainer's first modules and Ray."""
    return check_container(CONTAINER, image, IMAGE_CHECK_SCRIPT, env=env)
