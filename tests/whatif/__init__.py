"""lab/whatif: edits and their store."""
