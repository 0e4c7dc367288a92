"""Constructing a hosted component as the engine asks the plugin to, in-process under the mocks: the
property values another language sends (JSON through a protobuf Struct: every number a double),
through the provider's ``construct`` (name mapping, then the component)."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import rpc

from rlinf_eks.config import PROJECT
from rlinf_eks.hosted.provider import provider
from rlinf_eks.testing import plan_program

_PROVIDER = provider()


def wire(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as the provider receives them from another language's SDK."""
    struct = struct_pb2.Struct()
    struct.update(values)
    return rpc.deserialize_properties(struct)


def construct(component: str, name: str, values: dict[str, Any], opts: Optional[pulumi.ResourceOptions] = None) -> Any:
    """The provider's construct of ``rlinf-eks:index:<component>`` (inside a running program)."""
    return _PROVIDER.construct(name, f"{PROJECT}:index:{component}", wire(values), opts or pulumi.ResourceOptions())


def resources(program: Callable[[], Any], stack: str = "test", config: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """plan.json's resources of ``program`` (sorted by URN)."""
    return plan_program(program, project=PROJECT, stack=stack, config=config).to_json()["resources"]


def without_component(items: list[dict[str, Any]], type_: str, stack: str) -> list[dict[str, Any]]:
    """``items`` as if the one component of ``type_`` were not there: its children at the top
    (parent: the stack), its type gone from every URN; sorted by URN as plan.json is."""
    (component,) = [r for r in items if r["type"] == type_]
    root = f"urn:pulumi:{stack}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{stack}"
    text = json.dumps([r for r in items if r is not component])
    text = text.replace(json.dumps(component["urn"])[1:-1], root).replace(f"{type_}$", "")
    return sorted(json.loads(text), key=lambda r: r["urn"])
