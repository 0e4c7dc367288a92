"""The Pulumi program: `pulumi up` runs this file. All logic lives in the rlinf_eks package."""

import pulumi

from rlinf_eks.config import ConfigError
from rlinf_eks.program import run_program

try:
    outputs = run_program()
except ConfigError as err:
    # A clean failure that names every bad key, before any resource is registered.
    raise pulumi.RunError(str(err)) from None

for key, value in outputs.items():
    pulumi.export(key, value)
