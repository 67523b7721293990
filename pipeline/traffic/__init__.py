"""Stage 5 — traffic: every shipped workload laid onto its targets by the traffic library (`estimate/`), as tables."""
