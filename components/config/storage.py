"""The storage section: the checkpoint bucket and the FSx for Lustre shared filesystem."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .aws_rules import bucket_problem
from .types import AbsolutePath, Bool, Int, SettingsModel


class SharedFilesystemSettings(SettingsModel):
    enabled: Optional[Bool] = None
    """FSx for Lustre shared by all training pods. Defaults to on when nodeCount > 1 (multi-node FSDP
    writes a checkpoint shard per rank under the log path)."""
    storage_capacity_gib: Int = Field(1200, ge=1200)
    """Defaults to 1200 GiB (the smallest PERSISTENT_2 size)."""
    throughput_mbps_per_tib: Literal[125, 250, 500, 1000] = 250
    """FSx for Lustre PERSISTENT_2 throughput per TiB of storage, MB/s (125, 250, 500 or 1000). Defaults to 250."""
    mount_path: AbsolutePath = "/fsx"
    """Where pods mount it; checkpoints, logs and models live below. Defaults to /fsx."""

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, value: int) -> int:
        if value % 2400 and value != 1200:
            raise PydanticCustomError("fsx", "1200 GiB or a multiple of 2400 GiB (FSx for Lustre PERSISTENT_2)")
        return value


class StorageSettings(SettingsModel):
    bucket_name: Optional[str] = None
    """Checkpoint bucket name. Defaults to a generated unique name."""
    shared_filesystem: SharedFilesystemSettings = Field(default_factory=SharedFilesystemSettings)
    """FSx for Lustre shared by every training pod (checkpoints, logs, models)."""

    @field_validator("bucket_name")
    @classmethod
    def _bucket(cls, value: Optional[str]) -> Optional[str]:
        problem = bucket_problem(value) if value is not None else None
        if problem:
            raise PydanticCustomError("bucket", "{text}", {"text": problem})
        return value
