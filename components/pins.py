"""The external versions this project pins, read from ``pins.yaml`` beside this module: one file,
so a new release is one change there (Renovate's custom manager in renovate.json proposes it)
instead of a hunt through config defaults, Dockerfiles and tests."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

import yaml

MANIFEST = Path(__file__).with_name("pins.yaml")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    source: str
    datasource: Optional[str] = None
    dep_name: Optional[str] = None
    package_name: Optional[str] = None
    digest: Optional[str] = None
    registry_url: Optional[str] = None
    versioning: Optional[str] = None
    watch: Optional[str] = None


@functools.lru_cache(maxsize=1)
def pins() -> Mapping[str, Pin]:
    """Every pin of the manifest by name."""
    entries = yaml.safe_load(MANIFEST.read_text())["pins"]
    keys = {"depName": "dep_name", "packageName": "package_name", "registryUrl": "registry_url"}
    return {name: Pin(name=name, **{keys.get(k, k): str(v) for k, v in entry.items()}) for name, entry in entries.items()}


def version(name: str) -> str:
    """The pinned version of ``name`` (a KeyError names a pin the manifest does not have)."""
    return pins()[name].version


def commit(name: str) -> str:
    """The pinned git commit of ``name`` (a pin whose version is a branch)."""
    digest = pins()[name].digest
    if digest is None:
        raise KeyError(f"pin {name!r} has no digest")
    return digest
