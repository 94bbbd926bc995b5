"""lab/prompts: rendering, contracts, BOS."""
