"""The build context of one image family, packaged as CodeBuild's S3 source takes it: a zip of
``images/<family>/`` (the Dockerfile and every file beside it, which covers whatever it COPYs or
ADDs: Docker reads those from the context), byte-for-byte the same for the same files, so that
its digest names the build (the image tag) and an unchanged context is not built twice."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

# the zip's fixed timestamp: the earliest a zip entry can carry (DOS time starts in 1980)
_EPOCH = (1980, 1, 1, 0, 0, 0)
_INSTRUCTION = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.IGNORECASE)
_BASE_ARG = re.compile(r"^\s*ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


class ContextError(ValueError):
    """A build context that cannot be packaged (a missing folder, a COPY from outside it)."""


@dataclass(frozen=True)
class BuildContext:
    family: str
    archive: bytes
    files: tuple[str, ...]
    base_image: Optional[str]
    """The Dockerfile's ``ARG BASE_IMAGE`` default (the upstream image it builds FROM), if any."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.archive).hexdigest()


def _joined_lines(text: str) -> list[str]:
    """The Dockerfile's instructions, backslash continuations joined, comments left out."""
    lines, current = [], ""
    for raw in text.splitlines():
        if not current and raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    if current:
        lines.append(current)
    return lines


def copied_sources(dockerfile: str) -> list[str]:
    """The context paths the Dockerfile's COPY and ADD read (not ``--from`` stages, not URLs)."""
    sources: list[str] = []
    for line in _joined_lines(dockerfile):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        words = match.group(2).split()
        if any(w.startswith("--from") for w in words) or words[:1] == ["["] or match.group(2).lstrip().startswith("["):
            continue
        args = [w for w in words if not w.startswith("--")]
        if match.group(2).lstrip().startswith("<<"):
            continue  # a heredoc: no context file
        sources += [s for s in args[:-1] if "://" not in s]
    return sources


def package(images_dir: Path, family: str) -> BuildContext:
    """Zip ``images_dir/<family>/`` deterministically (sorted names, a fixed time and mode)."""
    folder = images_dir / family
    dockerfile = folder / "Dockerfile"
    if not dockerfile.is_file():
        known = sorted(p.name for p in images_dir.iterdir() if (p / "Dockerfile").is_file()) if images_dir.is_dir() else []
        raise ContextError(f"no {dockerfile}: image families here: {', '.join(known) or 'none'}")
    text = dockerfile.read_text(encoding="utf-8")
    for source in copied_sources(text):
        path = PurePosixPath(source)
        if path.is_absolute() or ".." in path.parts:
            raise ContextError(f"{dockerfile}: COPY/ADD {source}: outside the build context images/{family}/")
        if not any(folder.glob(source)):
            raise ContextError(f"{dockerfile}: COPY/ADD {source}: no such file in images/{family}/")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever the host: the same bytes on every machine
            archive.writestr(info, (folder / name).read_bytes())
    base = _BASE_ARG.search(text)
    return BuildContext(family, buffer.getvalue(), tuple(files), base.group(1) if base else None)


def image_tag(context: BuildContext, ray_version: str, base_image: str = "") -> str:
    """The tag of one build: the digest of what goes in (the context, Ray, the base), so a tag
    (immutable in the repository) names one build for good."""
    digest = hashlib.sha256(f"{context.sha256}\n{ray_version}\n{base_image}".encode()).hexdigest()
    return f"ray{ray_version}-{digest[:12]}"


def cached_base(base_image: str, registry: str, prefix: str) -> str:
    """The base image through the ECR pull-through cache of Docker Hub: ``<registry>/<prefix>/<repo>:<tag>``,
    an official image (no namespace) under ``library/`` as Docker Hub names it."""
    name = base_image.split("/", 1)[1] if base_image.startswith(("docker.io/", "registry-1.docker.io/")) else base_image
    if "/" not in name.split(":")[0]:
        name = f"library/{name}"
    return f"{registry}/{prefix}/{name}"
