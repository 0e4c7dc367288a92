"""A fake ``aws`` CLI over a local folder (FAKE_S3: s3://bucket/key is FAKE_S3/bucket/key) for the
checkpoint scripts (restore.sh, sync.sh): ``s3 sync`` applies ``--exclude``/``--include`` as the
AWS CLI does (in order, the last matching filter wins, patterns relative to the source, ``*``
crossing ``/``); ``s3 ls URI --recursive`` prints the AWS CLI's lines (date, time, size, whole
key) and exits 1 when nothing matches; ``s3 rm URI [--recursive]`` deletes. Every call is logged
to FAKE_S3/../aws-calls (one line each) for the tests to count."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FAKE_AWS = f"""#!{sys.executable}
import fnmatch, os, shutil, sys, time
args = sys.argv[1:]
root = os.environ["FAKE_S3"]
with open(os.path.join(os.path.dirname(root.rstrip("/")), "aws-calls"), "a") as log:
    log.write(" ".join(args) + "\\n")
local = lambda uri: os.path.join(root, uri[len("s3://"):]) if uri.startswith("s3://") else uri
assert args[0] == "s3", args
if args[1] == "sync":
    src, dst, rest = local(args[2]), local(args[3]), args[4:]
    filters, i = [], 0
    while i < len(rest):
        if rest[i] in ("--exclude", "--include"):
            filters.append((rest[i], rest[i + 1])); i += 2
        else:
            i += 1
    for base, _dirs, files in os.walk(src):
        for name in files:
            rel = os.path.relpath(os.path.join(base, name), src)
            keep = True
            for kind, pattern in filters:
                if fnmatch.fnmatchcase(rel, pattern):
                    keep = kind == "--include"
            if keep:
                target = os.path.join(dst, rel)
                try:
                    same = os.path.getsize(target) == os.path.getsize(os.path.join(src, rel)) and os.path.getmtime(target) >= os.path.getmtime(os.path.join(src, rel))
                except OSError:
                    same = False
                if not same:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(os.path.join(src, rel), target)
elif args[1] == "ls":
    assert "--recursive" in args, args
    uri = args[2]
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    top = os.path.join(root, bucket)
    found = 0
    for base, _dirs, files in os.walk(top):
        for name in sorted(files):
            key = os.path.relpath(os.path.join(base, name), top)
            if key.startswith(prefix):
                found += 1
                print(time.strftime("%Y-%m-%d %H:%M:%S"), str(os.path.getsize(os.path.join(base, name))).rjust(10), key)
    sys.exit(0 if found else 1)
elif args[1] == "rm":
    path = local(args[2])
    if "--recursive" in args:
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)
else:
    sys.exit(f"fake aws: {{args}} not faked")
"""


def install(folder: Path) -> dict[str, str]:
    """Writes the fake into ``folder/awsbin`` and an empty bucket root ``folder/s3``; returns the
    environment (PATH first, FAKE_S3, S3_URI s3://bkt/stack) a script runs with."""
    bin_dir = folder / "awsbin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    (folder / "s3").mkdir()
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_S3": str(folder / "s3"), "S3_URI": "s3://bkt/stack"}
