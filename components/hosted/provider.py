"""The component provider: the hosted components under the package name the resources register
(``rlinf-eks``, module ``index``), versioned with the library.

``provider/__main__.py`` (the plugin's entry point) calls :func:`serve`. It is the SDK's
``component_provider_host`` but for one difference: the provider is :class:`RlinfEksProvider`,
which reports a configuration problem as Pulumi's invalid-input error (``InputPropertiesError``:
the loader's lines, each with the property path it names) instead of a crash with a Python
traceback. :func:`schema` is the package schema the SDK's analyzer infers, as the CLI receives it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Optional

import pulumi
from pulumi.errors import InputPropertiesError
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.provider import ConstructResult
from pulumi.provider.server import ComponentInitError

from .. import __version__
from ..config import PROJECT, ConfigError
from .components import DevicePlugins, EfaGpuNodeGroup, KubeRayOperator, RlinfTraining
from .stack import RlinfStack

NAME = PROJECT
"""The package's name: the first part of every type token the components register."""

COMPONENTS: list[type[pulumi.ComponentResource]] = [EfaGpuNodeGroup, DevicePlugins, KubeRayOperator, RlinfTraining, RlinfStack]
"""What the package hosts, by class name: ``rlinf-eks:index:<name>``."""


_PATH_END = re.compile(r"=|: ")


def property_path(problem: str) -> str:
    """The key path a problem line starts with (up to ``=value`` or ``: ``, outside a quoted
    ``["key"]``), as the property path of the component's inputs (``aws:region`` is ``region``)."""
    depth, quoted = 0, False
    for i, char in enumerate(problem):
        if char == '"' and depth:
            quoted = not quoted
        elif not quoted and char == "[":
            depth += 1
        elif not quoted and char == "]":
            depth -= 1
        elif not quoted and not depth and _PATH_END.match(problem, i):
            path = problem[:i]
            return "region" if path == "aws:region" else path
    return ""


def input_error(err: ConfigError) -> InputPropertiesError:
    """The ConfigError as invalid inputs: its message (the loader's text) and one error per line."""
    return InputPropertiesError(str(err), [{"property_path": property_path(p), "reason": p} for p in err.problems])


class RlinfEksProvider(ComponentProvider):
    """The SDK's ComponentProvider, with configuration problems reported as invalid inputs."""

    def construct(
        self, name: str, resource_type: str, inputs: dict[str, Any], options: Optional[pulumi.ResourceOptions] = None
    ) -> ConstructResult:
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as err:
            if isinstance(err.inner, ConfigError):
                raise input_error(err.inner) from None
            raise


def provider() -> RlinfEksProvider:
    return RlinfEksProvider(COMPONENTS, NAME, None, __version__)


def schema() -> dict[str, Any]:
    """The package schema, as the plugin answers the CLI's GetSchema."""
    return json.loads(provider().schema or "{}")


def serve(argv: Optional[list[str]] = None) -> None:
    """Run the plugin: the language host starts it with the engine's address (``sys.argv[1:]``)."""
    from pulumi.provider import main

    main(provider(), sys.argv[1:] if argv is None else argv)
