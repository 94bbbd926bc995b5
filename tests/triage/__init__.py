"""lab/triage: analysis, slices, exports."""
