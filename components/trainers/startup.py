"""What a dialect's trainer does when it starts, as its recipe states it (``startup`` of
``recipes/<dialect>.yaml``), each fact with the upstream file and lines it was read from:

- ``checkpoints`` and ``logs``: where the trainer writes them, as a path of Hydra keys
  (``{runner.output_dir}``: the composed config's value) and wildcards (``{step}``, ``{role}``:
  any name; the last part of ``checkpoints`` is ``global_step_{step}``);
- ``sets``: which of those keys the stack sets, and to what (``logs``: the run's log directory,
  ``checkpoints``: its checkpoint directory, ``experiment``: workload.trainer.experimentName), so that
  everything lands in the run directory, absolute, whatever the trainer's working directory;
- ``resume``: the key that takes one checkpoint to resume from and what the trainer reads from
  it (absent: the trainer cannot resume, ``cannotResume`` says why);
- ``environment``: per rollout backend (``all``: every backend), the variables the pods ``set``
  for the trainer and those it ``refuse``s (a value containing ``contains`` kills it at startup);
- ``configCheck``: how the trainer composes and validates its config (the pods' config check,
  :class:`ConfigCheck`);
- ``loggedStep``: where the trainer's step N lands in its metrics (``offset``: it logs step N at
  N - offset; absent: at N), for the report's "step reached";
- ``evaluation``: what the dialect's evaluation composes and loads at startup: the keys its
  validation reads, how the evaluated model derives from the trained one, the files it loads from
  its copy of a checkpoint (:class:`EvalStartup`).

The trainers' launch (the dialects' ``sets`` overrides, :func:`.base.checkpoint_layout`: the
completeness-marker patterns and the resume globs), the pinned keys (:mod:`.pinned`), the pods'
environment (``workload/env.py``, and the RayJob's runtime env built from it), the image contract
(the refused environment, which the image check looks for in the image's own ENV) and the stack
rules (a refused ``workload.env``, :mod:`.startup_rules`), the evaluation's launch
(:mod:`.evaluation`: the evaluated model, the files copied into its checkpoint copy) and the pods'
config check (``workload/config_check.py``: ``configCheck``, ``evaluation.reads``) and the report
(``loggedStep``) read these;
nothing restates them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

__all__ = ["ConfigCheck", "EnvSetting", "EvalModel", "EvalStartup", "LoggedStep", "RefusedEnv", "ResumeFact", "StartupFacts", "WrittenPath", "parse_startup"]

DIRECTORIES = ("logs", "checkpoints", "experiment")
"""What ``sets`` may point a key at: the run's log directory, its checkpoint directory, the
experiment name."""

_FIELD = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class WrittenPath:
    """Where the trainer writes something: ``path`` with ``{hydra.key}`` values and ``{name}``
    wildcards (no dot: any one path segment), read at ``source`` (file:lines upstream)."""

    path: str
    source: str

    @property
    def keys(self) -> tuple[str, ...]:
        """The Hydra keys the path is made of, in order."""
        return tuple(name for name in _FIELD.findall(self.path) if "." in name)

    def resolve(
        self, values: Mapping[str, str], escape: Callable[[str], str] = str, wildcard: str = "*", suffixes: Mapping[str, str] = {}
    ) -> str:
        """The path with each key's value (passed through ``escape``: ``glob.escape`` for a Python
        glob, ``shlex.quote`` for a shell one, then ``suffixes[key]`` appended as it is) and each
        wildcard replaced by ``wildcard``. Raises KeyError for a key ``values`` lacks."""

        def one(match: re.Match) -> str:
            name = match.group(1)
            return escape(values[name].rstrip("/")) + suffixes.get(name, "") if "." in name else wildcard

        return _FIELD.sub(one, self.path)


@dataclass(frozen=True)
class ResumeFact:
    """``key`` takes one checkpoint folder (a ``global_step_<N>`` the trainer wrote) to resume
    from; ``reads``: what the trainer opens in it."""

    key: str
    reads: str
    source: str


@dataclass(frozen=True)
class EnvSetting:
    """A variable the pods set for the trainer, and why."""

    name: str
    value: str
    why: str
    source: str


@dataclass(frozen=True)
class RefusedEnv:
    """A variable whose value, containing ``contains``, kills the trainer at startup."""

    name: str
    contains: str
    why: str
    source: str

    def refuses(self, value: Optional[str]) -> bool:
        return value is not None and self.contains in value


@dataclass(frozen=True)
class EvalModel:
    """``section``: where the evaluation reads its model (RLinf: ``rollout.model``); ``source``:
    the trained model's section (``actor.model``), which ``section`` becomes (``section=${source}``,
    one copy, never a second); ``keep``: the keys the training's rollout took from ``section``
    itself (its precision and model path), whose overrides go to ``source`` in evaluation."""

    section: str
    source: str
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalStartup:
    """What the dialect's evaluation composes and loads when it starts (``startup.evaluation``):
    ``reads``: the keys the trainer's validation and model loading read in evaluation (the in-pod
    config check and the tests require each in the composed evaluation config); ``model``: how the
    evaluated model's section is derived from the trained one (None: the evaluation reads the
    training's own sections); ``model_files``: files the evaluation loads from its copy of the
    checkpoint that a checkpoint does not hold, copied into it from the model input the run trained
    from; ``sources``: where each was read upstream."""

    reads: Mapping[str, str] = field(default_factory=dict)
    """Key -> where upstream reads it."""
    model: Optional[EvalModel] = None
    model_files: tuple[tuple[str, bool], ...] = ()
    """(file, required): a required file the model must have; the others are copied when it has them
    (the training read them only then)."""
    sources: Mapping[str, str] = field(default_factory=dict)


def _evaluation(data: Mapping) -> EvalStartup:
    model = data.get("model")
    return EvalStartup(
        reads={str(k): str(v) for k, v in (data.get("reads") or {}).items()},
        model=EvalModel(str(model["section"]), str(model["from"]), tuple(model.get("keep") or ())) if model else None,
        model_files=tuple((str(name), str(need) == "required") for name, need in (data.get("modelFiles") or {}).items()),
        sources={str(k): " ".join(str(v).split()) for k, v in (data.get("sources") or {}).items()},
    )


STAND_INS = ("cluster", "placement", "weights")


@dataclass(frozen=True)
class ConfigCheck:
    """How the trainer composes and validates its config (``startup.configCheck``), for the pod's
    config check: ``version_base`` of its ``@hydra.main``; ``validate``: its validation function
    (``module:function``, empty for none that runs without the trainer's cluster); ``stand_ins``:
    the names that function calls to start or ask the Ray cluster (``cluster``), to place work on
    it (``placement``) or to read the staged model (``weights``), replaced in the check so that it
    runs as far as it can without Ray and before anything is staged;
    ``source``: where each was read."""

    version_base: Optional[str]
    validate: str = ""
    stand_ins: Mapping[str, str] = field(default_factory=dict)
    source: str = ""


def _config_check(data: Mapping) -> ConfigCheck:
    stand_ins = {str(k): str(v) for k, v in (data.get("standIns") or {}).items()}
    bad = {k: v for k, v in stand_ins.items() if v not in STAND_INS}
    if bad:
        raise ValueError(f"startup.configCheck.standIns: {bad} (each takes one of {', '.join(STAND_INS)})")
    version = data.get("versionBase")
    return ConfigCheck(None if version is None else str(version), str(data.get("validate") or ""), stand_ins, " ".join(str(data.get("source") or "").split()))


@dataclass(frozen=True)
class LoggedStep:
    """The trainer logs its step N (the one its checkpoint ``global_step_N`` is saved after) at step
    ``N - offset`` of its metrics; ``source``: where that was read."""

    offset: int = 0
    source: str = ""

    def trainer_step(self, logged: int) -> int:
        return logged + self.offset


def _logged_step(data: Mapping) -> LoggedStep:
    if not data:
        return LoggedStep()
    if "offset" not in data or "source" not in data:
        raise ValueError("startup.loggedStep needs offset and source")
    return LoggedStep(int(data["offset"]), " ".join(str(data["source"]).split()))


@dataclass(frozen=True)
class StartupFacts:
    checkpoints: WrittenPath
    logs: WrittenPath
    sets: Mapping[str, str]
    """Hydra key -> ``logs``, ``checkpoints`` or ``experiment``, in the order the launch passes them."""
    resume: Optional[ResumeFact]
    cannot_resume: str
    environment: Mapping[str, tuple[tuple[EnvSetting, ...], tuple[RefusedEnv, ...]]]
    """Rollout backend (or ``all``) -> (what the pods set, what the trainer refuses)."""
    evaluation: EvalStartup = field(default_factory=EvalStartup)
    config_check: ConfigCheck = field(default_factory=lambda: ConfigCheck(None))
    logged_step: LoggedStep = field(default_factory=LoggedStep)

    def overrides(self, *, log_dir: str, checkpoint_dir: str, experiment: str) -> list[str]:
        """The Hydra overrides that put the trainer's writes where ``sets`` says."""
        chosen = {"logs": log_dir, "checkpoints": checkpoint_dir, "experiment": experiment}
        return [f"{key}={chosen[what]}" for key, what in self.sets.items()]

    def env_set(self, backend: str) -> dict[str, str]:
        """The variables the pods set for the trainer rolling out with ``backend``."""
        return {item.name: item.value for scope in ("all", backend) for item in self.environment.get(scope, ((), ()))[0]}

    def env_refused(self, backend: str) -> tuple[RefusedEnv, ...]:
        """The variables the trainer rolling out with ``backend`` refuses."""
        return tuple(item for scope in ("all", backend) for item in self.environment.get(scope, ((), ()))[1])


def _path(data: Mapping, what: str) -> WrittenPath:
    spec = data.get(what) or {}
    if "path" not in spec or "source" not in spec:
        raise ValueError(f"startup.{what} needs path and source")
    return WrittenPath(str(spec["path"]), str(spec["source"]))


def _environment(data: Mapping) -> dict[str, tuple[tuple[EnvSetting, ...], tuple[RefusedEnv, ...]]]:
    environment = {}
    for backend, spec in (data or {}).items():
        spec = spec or {}
        sets = tuple(EnvSetting(name, str(item["value"]), " ".join(str(item["why"]).split()), str(item["source"])) for name, item in (spec.get("set") or {}).items())
        refuses = tuple(
            RefusedEnv(name, str(item["contains"]), " ".join(str(item["why"]).split()), str(item["source"])) for name, item in (spec.get("refuse") or {}).items()
        )
        environment[str(backend)] = (sets, refuses)
    return environment


def parse_startup(dialect: str, data: Mapping) -> StartupFacts:
    """The ``startup`` section of ``dialect``'s recipe."""
    sets = {str(k): str(v) for k, v in (data.get("sets") or {}).items()}
    bad = {k: v for k, v in sets.items() if v not in DIRECTORIES}
    if bad:
        raise ValueError(f"recipes/{dialect}.yaml startup.sets: {bad} (each key takes one of {', '.join(DIRECTORIES)})")
    resume = data.get("resume")
    facts = StartupFacts(
        checkpoints=_path(data, "checkpoints"),
        logs=_path(data, "logs"),
        sets=sets,
        resume=ResumeFact(str(resume["key"]), " ".join(str(resume["reads"]).split()), str(resume["source"])) if resume else None,
        cannot_resume=" ".join(str(data.get("cannotResume") or "").split()),
        environment=_environment(data.get("environment")),
        evaluation=_evaluation(data.get("evaluation") or {}),
        config_check=_config_check(data.get("configCheck") or {}),
        logged_step=_logged_step(data.get("loggedStep") or {}),
    )
    if not facts.checkpoints.path.endswith("/global_step_{step}"):
        raise ValueError(f"recipes/{dialect}.yaml startup.checkpoints.path must end in global_step_{{step}}")
    unset = [key for key in (*facts.checkpoints.keys, *facts.logs.keys) if key not in sets]
    if unset:
        raise ValueError(f"recipes/{dialect}.yaml startup: {unset} decide where the trainer writes, but startup.sets does not set them")
    if (facts.resume is None) == (not facts.cannot_resume):
        raise ValueError(f"recipes/{dialect}.yaml startup: resume or cannotResume, one of them")
    return facts
