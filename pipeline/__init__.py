"""fabricref: a declarative reference-data pipeline for GPU-cluster networks, with provenance."""

__version__ = "0.1.0"
