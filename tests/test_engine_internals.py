"""The Pulumi SDK internals the offline engine (rlinf_eks.offline.engine.engine) relies on, checked
against the installed SDK: when an upgrade renames or reshapes one, this fails naming the SDK
version and what changed, instead of the plan silently recording something else.

pyproject.toml pins pulumi to the range these were tested on (3.223 and 3.272); widen it only
after this file passes on the new SDK.
"""

from __future__ import annotations

import importlib
import inspect
import re
from importlib.metadata import version

import pytest
from packaging.specifiers import SpecifierSet

from rlinf_eks.offline.engine import engine
from tests.harness import ROOT

SDK = version("pulumi")


def _fail(what: str) -> None:
    pytest.fail(f"pulumi {SDK}: {what} (rlinf_eks/offline/engine/engine.py depends on it; see tests/test_engine_internals.py)")


def _symbol(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        _fail(f"{module}.{name} is gone ({error})")


def _parameters(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_the_installed_sdk_is_in_the_pinned_range():
    pins = re.findall(r'^\s*"pulumi([<>=!~][^"]*)",', (ROOT / "pyproject.toml").read_text(), re.M)
    assert len(pins) == 1, f"pyproject.toml: expected one pulumi requirement, found {pins}"
    pin = "pulumi" + pins[0]
    spec = SpecifierSet(pins[0])
    assert SDK in spec, f"pulumi {SDK} is outside the tested range {pin} in pyproject.toml"


def test_sync_await_takes_one_awaitable():
    sync_await = _symbol("pulumi.runtime.sync_await", "_sync_await")
    if _parameters(sync_await) != ["awaitable"]:
        _fail(f"_sync_await{inspect.signature(sync_await)} no longer takes one awaitable")


def test_mock_monitor_registers_through_make_urn_and_mocks():
    monitor = _symbol("pulumi.runtime.mocks", "MockMonitor")
    if _parameters(monitor.__init__) != ["self", "mocks"]:
        _fail(f"MockMonitor.__init__{inspect.signature(monitor.__init__)} is not (self, mocks)")
    if _parameters(monitor.make_urn) != ["self", "parent", "type_", "name"]:
        _fail(f"MockMonitor.make_urn{inspect.signature(monitor.make_urn)} is not (self, parent, type_, name): "
              "RecordingMonitor.make_urn overrides it")
    if _parameters(monitor.RegisterResource) != ["self", "request"]:
        _fail(f"MockMonitor.RegisterResource{inspect.signature(monitor.RegisterResource)} is not (self, request)")
    # RecordingMonitor reads the mocks back as monitor.mocks (for set_mocks), and RegisterResource
    # calls self.make_urn, which is how the engine's URNs get their parent type chain.
    source = inspect.getsource(monitor)
    if "self.mocks = mocks" not in source or "self.make_urn(" not in inspect.getsource(monitor.RegisterResource):
        _fail("MockMonitor no longer keeps .mocks or no longer makes URNs through self.make_urn")


def test_set_mocks_takes_the_keywords_the_engine_passes():
    set_mocks = _symbol("pulumi.runtime.mocks", "set_mocks")
    missing = {"mocks", "project", "stack", "preview", "monitor", "logger"} - set(_parameters(set_mocks))
    if missing:
        _fail(f"set_mocks{inspect.signature(set_mocks)} lacks {sorted(missing)}")


def test_settings_reset_and_the_rpc_manager_can_be_cleared():
    settings = importlib.import_module("pulumi.runtime.settings")
    reset = _symbol("pulumi.runtime.settings", "reset_options")
    missing = {"project", "stack"} - set(_parameters(reset))
    if missing:
        _fail(f"settings.reset_options{inspect.signature(reset)} lacks {sorted(missing)}")
    manager = getattr(getattr(settings, "SETTINGS", None), "rpc_manager", None)
    if manager is None or not callable(getattr(manager, "clear", None)):
        _fail("settings.SETTINGS.rpc_manager.clear() is gone: the engine clears outstanding RPCs between runs")


def test_run_pulumi_func_is_a_coroutine_of_one_function():
    run_pulumi_func = _symbol("pulumi.runtime.stack", "run_pulumi_func")
    if not inspect.iscoroutinefunction(run_pulumi_func) or _parameters(run_pulumi_func) != ["func"]:
        _fail(f"stack.run_pulumi_func{inspect.signature(run_pulumi_func)} is not `async def run_pulumi_func(func)`")


def test_set_all_config_takes_config_and_secret_keys():
    set_all_config = _symbol("pulumi.runtime.config", "set_all_config")
    if _parameters(set_all_config) != ["config", "secret_keys"]:
        _fail(f"set_all_config{inspect.signature(set_all_config)} is not (config, secret_keys)")


def test_the_wire_signatures_are_the_sdks():
    rpc = importlib.import_module("pulumi.runtime.rpc")
    expected = {"_special_sig_key": engine._SIG, "_special_secret_sig": engine._SECRET_SIG,
                "_special_resource_sig": engine._RESOURCE_SIG, "UNKNOWN": engine._UNKNOWN}
    changed = {name: getattr(rpc, name, "<gone>") for name, value in expected.items() if getattr(rpc, name, None) != value}
    if changed:
        _fail(f"the property wire signatures changed: {changed}")


def test_register_resource_request_has_the_fields_the_engine_records():
    resource_pb2 = importlib.import_module("pulumi.runtime.proto.resource_pb2")
    request = resource_pb2.RegisterResourceRequest.DESCRIPTOR.fields_by_name
    wanted = {"type", "name", "parent", "custom", "remote", "provider", "object", "propertyDependencies",
              "protect", "retainOnDelete", "dependencies", "ignoreChanges", "deleteBeforeReplace", "replaceOnChanges"}
    missing = wanted - set(request)
    if missing:
        _fail(f"RegisterResourceRequest lacks {sorted(missing)}")
    deps = resource_pb2.RegisterResourceRequest.PropertyDependencies.DESCRIPTOR.fields_by_name
    if "urns" not in deps:
        _fail("RegisterResourceRequest.PropertyDependencies lacks urns")
    response = resource_pb2.RegisterResourceResponse.DESCRIPTOR.fields_by_name
    if not {"urn", "id"} <= set(response):
        _fail("RegisterResourceResponse lacks urn or id")


def test_read_resource_has_what_the_engine_records_and_the_stack_reference_reads():
    """RecordingMonitor.ReadResource records a read (an experiment's StackReference), and
    program.read_platform awaits StackReference.get_output_details for each platform output."""
    resource_pb2 = importlib.import_module("pulumi.runtime.proto.resource_pb2")
    request = resource_pb2.ReadResourceRequest.DESCRIPTOR.fields_by_name
    missing = {"id", "type", "name", "parent", "properties", "dependencies", "provider"} - set(request)
    if missing:
        _fail(f"ReadResourceRequest lacks {sorted(missing)}")
    if "urn" not in resource_pb2.ReadResourceResponse.DESCRIPTOR.fields_by_name:
        _fail("ReadResourceResponse lacks urn")
    monitor = _symbol("pulumi.runtime.mocks", "MockMonitor")
    if _parameters(monitor.ReadResource) != ["self", "request"] or "self.mocks.new_resource(" not in inspect.getsource(monitor.ReadResource):
        _fail("MockMonitor.ReadResource(self, request) no longer answers a read through mocks.new_resource")
    reference = _symbol("pulumi", "StackReference")
    if not inspect.iscoroutinefunction(reference.get_output_details):
        _fail("StackReference.get_output_details is no longer a coroutine (program.read_platform awaits it)")
    details = _symbol("pulumi.stack_reference", "StackReferenceOutputDetails")
    if not {"value", "secret_value"} <= set(_parameters(details.__init__)):
        _fail("StackReferenceOutputDetails no longer carries value and secret_value")


def test_a_secret_and_a_resource_reference_come_back_as_the_engine_masks_them():
    """End to end on the wire: a secret input is masked and a resource reference becomes its URN."""
    import pulumi

    class Thing(pulumi.CustomResource):
        def __init__(self, name, props, opts=None):
            super().__init__("test:index:Thing", name, props, opts)

    def program():
        first = Thing("first", {"value": "x"})
        Thing("second", {"token": pulumi.Output.secret("s3cr3t"), "ref": first})
        return {}

    run = engine.run(program, project="p", stack="s", config={})
    second = next(r for r in run.registrations if r.name == "second")
    assert second.inputs["token"] == engine.SECRET, second.inputs
    first = next(r for r in run.registrations if r.name == "first")
    assert second.inputs["ref"] == first.urn, second.inputs


def test_the_sdk_walks_the_stack_through_get_stack_trace_which_the_engine_skips():
    """engine._no_stack_traces replaces the module global the SDK's register and read paths call;
    if the SDK stopped calling it by that name, plans would silently pay for the walk again."""
    sdk_resource = importlib.import_module("pulumi.runtime.resource")
    walk = _symbol("pulumi.runtime.resource", "_get_stack_trace")
    if _parameters(walk):
        _fail(f"_get_stack_trace takes {_parameters(walk)}")
    calls = re.findall(r"\b_get_stack_trace\(\)", inspect.getsource(sdk_resource))
    if len(calls) < 2:
        _fail(f"pulumi.runtime.resource calls _get_stack_trace() {len(calls)} times (register and read did)")
    source_pb2 = importlib.import_module("pulumi.runtime.proto.source_pb2")
    assert isinstance(walk(), source_pb2.StackTrace)

    seen = []

    def program():
        seen.append((sdk_resource._get_stack_trace is walk, sdk_resource._get_stack_trace()))
        return {}

    engine.run(program, project="p", stack="s", config={})
    assert seen == [(False, source_pb2.StackTrace())], "during a run the SDK gets an empty trace without walking"
    assert sdk_resource._get_stack_trace is walk, "the SDK's stack walk is restored after a run"


def test_the_sdk_calls_the_monitor_from_the_loops_default_executor_which_the_engine_runs_inline():
    """engine._monitor_calls_inline makes the event loop's default executor run each call at once on
    the loop's thread: the SDK sends RegisterResource and ReadResource through
    ``run_in_executor(None, ...)``, and the mock monitor needs no thread. If the SDK stopped using the
    default executor, or the loop stopped keeping it in ``_default_executor``, plans would silently
    hand every call to a thread pool again."""
    import threading

    import pulumi
    from pulumi.runtime.sync_await import _ensure_event_loop

    sdk_resource = importlib.import_module("pulumi.runtime.resource")
    uses = re.findall(r"run_in_executor\(\s*None,", inspect.getsource(sdk_resource))
    if len(uses) < 2:
        _fail(f"pulumi.runtime.resource calls run_in_executor(None, ...) {len(uses)} times (register and read did)")
    loop = _ensure_event_loop()
    if not hasattr(loop, "_default_executor"):
        _fail(f"{type(loop).__name__} keeps no _default_executor")
    before = loop._default_executor

    threads = []

    class Recording(engine.RecordingMonitor):
        def RegisterResource(self, request):  # noqa: N802
            threads.append(threading.get_ident())
            return super().RegisterResource(request)

    original, engine.RecordingMonitor = engine.RecordingMonitor, Recording
    try:
        run = engine.run(lambda: (pulumi.CustomResource("test:index:Thing", "one", {}), {})[1], project="p", stack="s", config={})
    finally:
        engine.RecordingMonitor = original
    assert [r.name for r in run.registrations] == ["one"]
    assert threads and set(threads) == {threading.get_ident()}, "the monitor answered on the loop's thread"
    assert loop._default_executor is before, "the loop's default executor is restored after a run"
