"""Stage 3 — compile: reference models bind claims to fields; the registry is written as Parquet + DuckDB."""
