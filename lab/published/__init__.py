"""Published runs: the catalogue of public per-step result files, fetched, cached and imported into the store."""
