"""Stage 5 — traffic: workloads laid onto installed topologies; the figures teach relationships and are not
a collective library's exact schedule."""

CAVEAT = (
    "These figures teach relationships (alpha-beta costs on the installed wiring); they are not an exact NCCL/RCCL "
    "schedule, and they do not predict measured throughput."
)
