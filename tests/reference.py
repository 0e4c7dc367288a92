"""Where a file of reference data is: below tests/data/reference when the project carries a newer
copy than ../shared (a pin that moved past the shared data: tests/data/reference/README.md says
where each came from), else below ../shared, at the same relative path."""

from __future__ import annotations

from pathlib import Path

from tests.fetch_shared_data import shared_folder

OWN = Path(__file__).parent / "data" / "reference"
SHARED = shared_folder()


def reference(relative: str) -> Path:
    """``relative`` (such as ``schemas/jobset/jobset.x-k8s.io_jobsets.yaml``) in the project's own
    reference data if it is there, else in the shared folder."""
    own = OWN / relative
    return own if own.exists() else SHARED / relative
