"""lab/scoring: parsing, command units, F1, equiv, golden values."""
