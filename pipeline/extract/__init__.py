"""Stage 2 — extract: declarative rules turn pinned snapshots into claims (field records per source)."""
