"""Run the very program ``pulumi up`` runs, in-process under Pulumi's mocks, and record every
registration exactly as the engine would receive it (inputs by wire name, parent, provider,
options)."""

from __future__ import annotations

import concurrent.futures
import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import pulumi
import pulumi.runtime.resource as sdk_resource
from google.protobuf import json_format
from pulumi.runtime import mocks, settings
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from ...placeholders import planned_offline
from ...plan_reader import ROOT_STACK, SECRET, UNKNOWN
from .fake_cloud import FakeCloud

__all__ = ["SECRET", "UNKNOWN", "Registration", "RecordingMonitor", "Run", "run", "wire_value"]

# Pulumi's property wire format (pulumi.runtime.rpc: _special_sig_key, _special_secret_sig,
# _special_resource_sig, UNKNOWN). These and the other SDK internals used below (_sync_await,
# MockMonitor.RegisterResource/make_urn, SETTINGS.rpc_manager, stack.run_pulumi_func, the
# RegisterResourceRequest fields, resource._get_stack_trace, the SDK's run_in_executor(None, ...) and the
# loop's _default_executor) are checked by tests/test_engine_internals.py against the
# installed SDK; pyproject.toml pins the SDK range they were tested on.
_SIG = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def wire_value(value: Any) -> Any:
    """A registered property as plain JSON: secrets masked, resource references as their URN,
    whole floats as integers (the wire carries every number as a double)."""
    if isinstance(value, dict):
        sig = value.get(_SIG)
        if sig == _SECRET_SIG:
            return SECRET
        if sig == _RESOURCE_SIG:
            return value.get("urn")
        return {k: wire_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wire_value(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == _UNKNOWN:
        return UNKNOWN
    return value


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    id: str | None
    parent: str | None
    custom: bool
    remote: bool
    provider: str | None
    inputs: dict[str, Any]
    options: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "parent": self.parent,
            "custom": self.custom,
            "provider": self.provider,
            "inputs": self.inputs,
            "options": self.options,
        }


class RecordingMonitor(mocks.MockMonitor):
    """The mock monitor, keeping what each RegisterResource request carried."""

    def __init__(self, cloud: pulumi.runtime.Mocks, project: str, stack: str):
        super().__init__(cloud)
        self.project, self.stack = project, stack
        self.registrations: list[Registration] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """URNs as the engine makes them: children of the root stack carry no parent type."""
        if parent and parent.split("::")[2] != ROOT_STACK:
            type_ = parent.split("::")[2] + "$" + type_
        # Project and stack are the monitor's own: the runtime's settings live in a context
        # variable that the mock monitor's worker threads do not always see.
        return "urn:pulumi:" + "::".join([self.stack, self.project, type_, name])

    def RegisterResource(self, request):  # noqa: N802 - the gRPC method's name
        response = super().RegisterResource(request)
        if request.type == ROOT_STACK:
            return response
        inputs = wire_value(json_format.MessageToDict(request.object))
        property_urns = {urn for deps in request.propertyDependencies.values() for urn in deps.urns}
        provider = request.provider.rsplit("::", 1)[0] if request.provider else None
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                id=response.id or None,
                parent=request.parent or None,
                custom=bool(request.custom),
                remote=bool(request.remote),
                provider=provider,
                inputs=inputs,
                options={
                    "protect": bool(request.protect),
                    "retainOnDelete": bool(request.retainOnDelete),
                    "dependsOn": sorted(set(request.dependencies) - property_urns),
                    "ignoreChanges": sorted(request.ignoreChanges),
                    "deleteBeforeReplace": bool(request.deleteBeforeReplace),
                    "replaceOnChanges": sorted(request.replaceOnChanges),
                },
            )
        )
        return response

    def ReadResource(self, request):  # noqa: N802 - the gRPC method's name
        """A read (an experiment's StackReference of its platform): recorded like a registration,
        so the plan shows what the stack reads; nothing is created."""
        response = super().ReadResource(request)
        provider = request.provider.rsplit("::", 1)[0] if request.provider else None
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                id=request.id or None,
                parent=request.parent or None,
                custom=True,
                remote=False,
                provider=provider,
                inputs=wire_value(json_format.MessageToDict(request.properties)),
                # a read has no resource options but its dependencies: the same keys as a registration's
                options={"protect": False, "retainOnDelete": False, "dependsOn": sorted(request.dependencies),
                         "ignoreChanges": [], "deleteBeforeReplace": False, "replaceOnChanges": []},
            )
        )
        return response


@dataclass
class Run:
    project: str
    stack: str
    registrations: list[Registration]
    outputs: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    region: str = "us-east-1"
    """The AWS region the program ran against (aws:region)."""


def run(
    program: Callable[[], Mapping[str, Any] | None],
    *,
    project: str,
    stack: str,
    config: Mapping[str, str],
    secret_keys: set[str] | None = None,
    region: str = "us-east-1",
    stack_references: Mapping[str, Mapping[str, Any]] | None = None,
    vpc_id: str | None = None,
    offline: bool = True,
) -> Run:
    """Run ``program`` (which registers resources and returns its stack outputs) under mocks.

    ``stack_references``: the outputs a StackReference of each fully qualified stack name reads
    (FakeCloud.stack_references); ``vpc_id``: the existing VPC the stack names, which a looked-up
    subnet it did not create lies in; ``offline``: the plan reports the placeholders the program
    would refuse (rlinf_eks.placeholders.planned_offline); False runs it as ``pulumi up`` does."""
    settings.reset_options(project=project, stack=stack)
    pulumi.runtime.set_all_config(dict(config), sorted(secret_keys or ()))
    monitor = RecordingMonitor(FakeCloud(region, stack_references, vpc_id), project, stack)
    warnings: list[str] = []
    logger = _WarningLog(warnings)
    mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)  # type: ignore[arg-type]

    outputs: dict[str, Any] = {}

    async def resolve(values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            out = pulumi.Output.from_input(value)
            resolved = await out.future()
            outputs[key] = SECRET if await out.is_secret() else wire_value(resolved)

    def body() -> Any:
        values = program() or {}
        return _sync_await(resolve(values))

    settings.SETTINGS.rpc_manager.clear()
    with _no_stack_traces(), _monitor_calls_inline(), planned_offline() if offline else contextlib.nullcontext():
        _sync_await(pulumi.runtime.stack.run_pulumi_func(body))
    return Run(project=project, stack=stack, registrations=list(monitor.registrations), outputs=outputs, warnings=warnings, region=region)


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """For each registration the SDK walks the Python stack (``traceback.extract_stack``, every
    frame's file as a URI) so that the engine can show where a resource was declared. A plan
    records no source positions, so under the offline engine the request carries an empty trace:
    about a tenth of a plan's registration time. ``pulumi up`` never runs this."""
    walk = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = walk


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each call at once on the caller's thread and hands back its finished future; it never
    starts a thread (a ThreadPoolExecutor only because the event loop takes no other default)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - the future carries it, as a pool's would
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def _monitor_calls_inline() -> Iterator[None]:
    """The SDK sends every engine call (RegisterResource, ReadResource, Invoke, ...) from the event
    loop's default executor, a thread pool, because a real engine answers over gRPC. The mock
    monitor answers in-process at once, so under the offline engine the calls run inline on the
    loop's thread: no thread hand-off and wake-up per call, no GIL contention with the loop.
    ``pulumi up`` never runs this."""
    loop = _ensure_event_loop()
    pool = loop._default_executor  # type: ignore[attr-defined]
    loop.set_default_executor(_InlineExecutor())
    try:
        yield
    finally:
        loop._default_executor = pool  # type: ignore[attr-defined]


class _WarningLog:
    """A logger stand-in for the mock engine: warnings and errors are kept for the plan's report."""

    def __init__(self, sink: list[str]):
        self.sink = sink

    def debug(self, message: str) -> None:
        pass

    info = debug

    def warning(self, message: str) -> None:
        self.sink.append(message)

    def error(self, message: str) -> None:
        self.sink.append(f"error: {message}")


