"""Stage 5 — traffic: every shipped workload laid onto its targets by the traffic library (`estimate/`), as tables.

One DVC stage per workload (`traffic-workload@<id>`, its knobs `workloads.<id>` in params.yaml), per sharing pair,
the KV-transfer curve and the measured comparison, then `traffic`, which combines the parts into the tables."""
