import copy, json, os, sys

# The config check (sh/config-check.sh): in the training image, before Ray starts and before any
# weights are staged, compose the trainer's Hydra config with the rendered overrides, require the
# keys the trainer reads at startup, resolve every interpolation, and run the trainer's own config
# validation as far as it goes without a Ray cluster. argv[1]: the check as JSON (config_dir,
# config_name, version_base, overrides, requires {key: why}, validate "module:function" or "",
# stand_ins {name in that module: "cluster" | "placement" | "weights"}, gpus: the GPUs the run's Ray cluster
# will have, exit, what). A failure prints one line and writes it to the termination message.
spec = json.loads(sys.argv[1])
status, what = int(spec["exit"]), spec["what"]


def finish(code, line):
    print(line, file=sys.stderr)
    if code:
        try:
            with open(spec.get("termination_log") or "/dev/termination-log", "w") as f:
                f.write(line[:4000])
        except OSError:
            pass
    sys.exit(code)


def last_line(error):
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:600]


def fail(reason):
    finish(status, f"rlinf-eks config-check: FAILED: {what}: {reason} (exit {status})")


try:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
except Exception as error:
    fail(f"hydra cannot be imported in the image ({last_line(error)}): the trainer composes its config with it")

validate = None
if spec["validate"]:
    module_name, function_name = spec["validate"].split(":", 1)
    try:
        # the trainer's package registers its OmegaConf resolvers on import (RLinf: rlinf/__init__.py)
        module = __import__(module_name, fromlist=[function_name])
        validate = getattr(module, function_name)
    except Exception as error:
        fail(f"python3 cannot import {spec['validate']}, the trainer's config validation ({last_line(error)})")

try:
    with initialize_config_dir(config_dir=spec["config_dir"], version_base=spec["version_base"]):
        cfg = compose(config_name=spec["config_name"], overrides=spec["overrides"])
except Exception as error:
    fail(f"Hydra cannot compose {spec['config_name']} ({spec['config_dir']}) with the rendered overrides: {last_line(error)}")

missing = object()
for key, why in spec["requires"].items():
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True, default=missing)
    except Exception as error:
        fail(f"{key} cannot be read from the composed config ({last_line(error)}); {why} reads it")
    if value is missing:
        fail(f"{key} is not in the composed config; {why} reads it")

try:
    OmegaConf.to_container(cfg, resolve=True)
except Exception as error:
    fail(f"the composed config does not resolve: {last_line(error)}")


class NeedsCluster(Exception):
    """Raised where the trainer's validation would start or ask the Ray cluster, or read the
    model's files (staged after this check)."""


class NoCluster:
    """A stand-in for the trainer's cluster object: constructing it starts nothing; asking it
    anything (nodes, GPUs) ends the validation there, as far as it can go without Ray."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        raise NeedsCluster(name)


def needs_cluster(*args, **kwargs):
    raise NeedsCluster("staged model")


def ranks(text):
    """How many ranks an integer range of RLinf's placement syntax names ("3", "0-7"), None for
    anything else."""
    first, _, last = text.strip().partition("-")
    if not first.isdigit() or not (last or first).isdigit() or int(last or first) < int(first):
        return None
    return int(last or first) - int(first) + 1


class Placement:
    """A stand-in for the trainer's component placement on the run's GPUs (spec "gpus": nodes
    times GPUs a node): it answers a component's world size from cluster.component_placement
    where that is a plain string of RLinf's syntax ("actor,rollout: all", "env: 0-3",
    "0-1:0-3,4-7": each segment's process ranks, else its resource ranks, "all" every GPU), so
    that the validation after it (batch sizes against the world size, then the FSDP config) runs
    here; anything else (a node group, ranks or attributes it cannot answer without the cluster)
    ends the validation there."""

    def __init__(self, cfg, cluster=None, *args, **kwargs):
        self.placement = {}
        for names, where in (cfg.cluster.get("component_placement") or {}).items():
            for name in str(names).split(","):
                self.placement[name.strip()] = where if isinstance(where, (str, int)) else None

    def get_world_size(self, component):
        where = self.placement.get(component)
        if where is None:
            raise NeedsCluster(f"the placement of {component}")
        size = 0
        for segment in str(where).split(","):
            resources, _, processes = segment.partition(":")
            count = int(spec["gpus"]) if not processes and resources.strip() == "all" else ranks(processes or resources)
            if not count:
                raise NeedsCluster(f"the placement {where} of {component}")
            size += count
        return size

    def __getattr__(self, name):
        raise NeedsCluster(name)


reached = "the whole validation"
if validate is not None:
    # the names the validation calls for the cluster ("cluster"), for placing work on it
    # ("placement": on the run's GPUs) or to read the staged model ("weights"), in its module:
    # replaced, so that nothing connects to Ray and nothing unstaged is read from this container
    for name, kind in spec.get("stand_ins", {}).items():
        if hasattr(module, name):
            setattr(module, name, {"cluster": NoCluster, "placement": Placement}.get(kind, needs_cluster))
    try:
        validate(copy.deepcopy(cfg))
    except NeedsCluster:
        reached = "up to where it needs the Ray cluster or the staged model"
    except Exception as error:
        fail(f"{spec['validate']} refuses the composed config: {last_line(error)}")
finish(0, f"rlinf-eks config-check: OK: {spec['config_name']} composes with {len(spec['overrides'])} overrides, "
       f"{len(spec['requires'])} keys the trainer reads are set" + (f", {spec['validate']} passes {reached}" if validate else ""))
