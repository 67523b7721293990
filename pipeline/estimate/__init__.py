"""The traffic library: a workload decomposed into communications, placed, routed over the installed wiring and
costed; step time, memory and serving. Pure: it reads the registry's tables and models/, and writes nothing. The
traffic stage, the API, the CLI and the explorer call it; it imports no stage."""

CAVEAT = (
    "These figures teach relationships (alpha-beta costs on the installed wiring); they are not an exact NCCL/RCCL "
    "schedule, and they do not predict measured throughput."
)
