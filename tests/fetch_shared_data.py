"""The reference data the tests read (CRDs, chart values, trainer configs, the ForceNew table), fetched
at the pinned commits into the shared folder, each file checked against its sha256.

    python -m tests.fetch_shared_data                # into $RLINF_EKS_SHARED, or ../shared beside the clone
    python -m tests.fetch_shared_data --into DIR     # then: RLINF_EKS_SHARED=DIR python -m pytest ...

What to fetch is tests/data/shared-data.json: per folder, the upstream repository and commit, and per
file its path there (fetched from https://raw.githubusercontent.com/<repository>/<commit>/<path>) or,
for the facts this project wrote down itself (a chart's meta.json, the ForceNew table), its copy in
this repository; and every file's sha256. A file already there with the right sha256 is kept; a
download whose sha256 differs is not written, and the command exits 1 naming it. Standard library
only: it runs before the test dependencies are installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "data" / "shared-data.json"
SHARED_ENV = "RLINF_EKS_SHARED"
UPSTREAM = "https://raw.githubusercontent.com"


def shared_folder() -> Path:
    """The folder the tests read the reference data from: $RLINF_EKS_SHARED, else ../shared beside
    the repository (the one setting; tests/harness.py SHARED is this)."""
    configured = os.environ.get(SHARED_ENV, "").strip()
    return Path(configured).expanduser().resolve() if configured else ROOT.parent / "shared"


def manifest(path: Path = MANIFEST) -> dict[str, dict]:
    """{folder: {"repository", "commit", "files": {name: {"path" | "copy", "sha256"}}}}."""
    return json.loads(path.read_text())["folders"]


def entries(folders: dict[str, dict], base_url: str = UPSTREAM, root: Path = ROOT):
    """(relative path in the shared folder, where its bytes come from (a URL or a repository file), sha256)."""
    for folder, source in folders.items():
        for name, file in source["files"].items():
            origin = root / file["copy"] if "copy" in file else f"{base_url}/{source['repository']}/{source['commit']}/{file['path']}"
            yield f"{folder}/{name}", origin, file["sha256"]


def _read(origin: str | Path) -> bytes:
    if isinstance(origin, Path):
        return origin.read_bytes()
    with urllib.request.urlopen(origin, timeout=60) as response:  # noqa: S310 (https or a file:// mirror)
        return response.read()


def fetch(into: Path, folders: dict[str, dict], base_url: str = UPSTREAM, root: Path = ROOT, say=print) -> list[str]:
    """Fetch every file missing from ``into`` or differing from its sha256; the problems, one a line."""
    problems, fetched, kept = [], 0, 0
    for relative, origin, sha256 in entries(folders, base_url, root):
        target = into / relative
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
            kept += 1
            continue
        try:
            data = _read(origin)
        except OSError as e:
            problems.append(f"{relative}: cannot read {origin}: {e}")
            continue
        found = hashlib.sha256(data).hexdigest()
        if found != sha256:
            problems.append(f"{relative}: {origin} has sha256 {found}, not the pinned {sha256}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        partial.replace(target)
        fetched += 1
    say(f"{into}: {fetched} fetched, {kept} already there, {len(problems)} failed")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fetch_shared_data", description=__doc__.split("\n\n")[0])
    parser.add_argument("--into", type=Path, default=None, help=f"the folder to fill (default: ${SHARED_ENV}, else ../shared)")
    parser.add_argument("--base-url", default=UPSTREAM, help="where <repository>/<commit>/<path> is read from (a file:// mirror, say)")
    args = parser.parse_args(argv)
    into = args.into.expanduser().resolve() if args.into else shared_folder()
    problems = fetch(into, manifest(), args.base_url.rstrip("/"), ROOT)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems and into != shared_folder():
        print(f"the tests read it with {SHARED_ENV}={into}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
