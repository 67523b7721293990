"""Stage — database: registry/registry.duckdb, views over every Parquet table for people who open it directly."""
