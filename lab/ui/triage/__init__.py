"""The Triage tab: where runs disagree, sliced and exported."""
