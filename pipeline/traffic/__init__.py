"""Stage 5 — traffic: every shipped workload laid onto its targets by the traffic library (`estimate/`), one DVC
stage per workload, sharing pair, KV curve and measured comparison, then `traffic`, which combines the parts."""
