import glob, os, re, socket, sys, time

mode, patterns, marker = sys.argv[1], sys.argv[2].split("\n"), sys.argv[3]


def scan(mode):
    by_parent = {}
    for pattern in filter(None, patterns):
        for path in glob.glob(pattern):
            match = re.fullmatch(r"global_step_(\d+)", os.path.basename(path))
            if match and os.path.isdir(path):
                by_parent.setdefault(os.path.dirname(path), {})[int(match.group(1))] = path
    complete = []
    for parent, steps in by_parent.items():
        try:
            tracked = int(open(os.path.join(parent, "latest_checkpointed_iteration.txt")).read().strip())
        except (OSError, ValueError):
            tracked = -1
        newest = max(steps)
        for step, path in steps.items():
            done = os.path.exists(os.path.join(path, marker))
            if not done and mode != "newest" and (mode == "final" or step < newest or step <= tracked):
                # every pod marks (each node's own run directory without the shared filesystem):
                # a per-process temporary name, so two pods never rename each other's file
                tmp = os.path.join(path, f"{marker}.{socket.gethostname()}.{os.getpid()}.tmp")
                try:
                    with open(tmp, "w") as out:
                        out.write(f"{step}\n")
                    os.replace(tmp, os.path.join(path, marker))
                except OSError as err:
                    print(f"rlinf-eks: could not mark {path} complete: {err}", file=sys.stderr)
                    continue
                print(f"rlinf-eks: checkpoint {path} is complete", file=sys.stderr)
                done = True
            if done:
                complete.append((step, path))
    return max(complete)[1] if complete else "none"


if mode == "loop":
    # a glob of the checkpoint parents: a few directory listings, no file stats
    while True:
        scan("mark")
        time.sleep(10)
result = scan(mode)
if mode == "newest":
    print(result)
