"""lab/store: DuckDB store, import, equiv fill, plots, labels."""
