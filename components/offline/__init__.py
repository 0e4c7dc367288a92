"""Running the program with no Pulumi CLI and no cloud: stack files, mocks, the offline plan, diffs."""

from .engine.sdk_imports import install as _install_lazy_sdk_imports

_install_lazy_sdk_imports()  # import only the SDK modules the program touches (sdk_imports.py)
