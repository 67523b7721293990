"""fabricref: a declarative reference-data pipeline for GPU-cluster networks, with provenance.

Imported as `fabricref` (pyproject maps the `pipeline/` folder to that name), the package offers the Python API
of api.py: `fabricref.registry()`, `fabricref.topology(id)`, `fabricref.estimate_workload(topology, workload)`,
`fabricref.audit(ref, field)`, loaded on first use so importing the package stays light.
The version is pyproject.toml's (`fabricref --version` reads the installed metadata); it is not repeated here.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["audit", "checkout", "estimate_workload", "registry", "topology"]


def _api(name: str) -> Any:
    from . import api

    return getattr(api, name)


class _Fabricref(types.ModuleType):
    """`audit` and `topology` are also submodules, and importing a submodule rebinds the package attribute of
    that name to the module. Under the name `fabricref` the API functions win: these properties answer them and
    ignore the rebinding (the submodules stay in sys.modules, so `from .audit import ...` is unaffected). Under
    the folder name `pipeline` (stages, tests) the package is a plain package."""

    audit = property(lambda self: _api("audit"), lambda self, module: None)
    topology = property(lambda self: _api("topology"), lambda self, module: None)


def __getattr__(name: str) -> Any:
    """PEP 562: the other API functions, loaded on first use."""
    if name in __all__:
        return _api(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "fabricref":
    sys.modules[__name__].__class__ = _Fabricref
