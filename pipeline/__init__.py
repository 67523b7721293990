"""fabricref: an AI-cluster network explorer on a provenance registry.

Imported as `fabricref` (pyproject.toml maps the `pipeline/` folder to that name). The Python API (api.py) is
loaded on first use, so importing the package stays light; the version is pyproject.toml's.
"""

from __future__ import annotations

from typing import Any

if __name__ != "fabricref":
    raise ImportError(
        f"the package is imported as `fabricref`, not `{__name__}`: use `import fabricref` and "
        "`python -m fabricref.<stage>` (the folder pipeline/ is its source; see CHANGELOG.md)"
    )

__all__ = ["audit", "checkout", "estimate_workload", "graph", "plan_record", "plan_serve", "plan_train", "registry"]


def __getattr__(name: str) -> Any:
    """PEP 562: the API functions, loaded on first use."""
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
