"""fabricref: a declarative reference-data pipeline for GPU-cluster networks, with provenance.

The version is pyproject.toml's (`fabricref --version` reads the installed metadata); it is not repeated here.
"""
