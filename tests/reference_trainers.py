"""The trainers' reference Hydra configs the tests compose against: the shared reference data
(``$RLINF_EKS_SHARED/reference/trainers``), with the repository's byte-identical upstream copies of
configs it lacks yet (``tests/data/upstream-trainers``, README.md there) added."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from tests.harness import SHARED

UPSTREAM_OVERLAY = Path(__file__).resolve().parent / "data" / "upstream-trainers"
"""Upstream configs the reference data lacks (quickstart's maniskill_ppo_mlp; README.md there)."""


def overlay_files() -> list[Path]:
    return sorted(p.relative_to(UPSTREAM_OVERLAY) for p in UPSTREAM_OVERLAY.rglob("*.yaml"))


def _reference_with_overlay(shared: Path) -> Path:
    """The reference trainer configs, with the repository's upstream copies added where the shared
    folder lacks them: ``shared`` itself when it holds them all (or is absent: the tests then skip or
    fail as without it), else a folder of links to its files plus the copies, made once per process."""
    missing = [rel for rel in overlay_files() if not (shared / rel).exists()]
    if not shared.is_dir() or not missing:
        return shared
    merged = Path(tempfile.mkdtemp(prefix="rlinf-eks-reference-"))
    atexit.register(shutil.rmtree, merged, True)
    for source in shared.rglob("*"):
        target = merged / source.relative_to(shared)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    for rel in missing:
        (merged / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(UPSTREAM_OVERLAY / rel, merged / rel)
    return merged


REFERENCE = _reference_with_overlay(SHARED / "reference" / "trainers")
"""Where the tests find the trainers' configs (VERL_DIR, EMBODIED_DIR, REASONING_DIR below it)."""
