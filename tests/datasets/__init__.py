"""lab/data and lab/resultfiles: replay records, sources, download, result-file validation."""
