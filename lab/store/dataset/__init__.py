"""Runs as a Hugging Face dataset: export stored runs to a dataset folder (one Parquet config per run and a
dataset card), import such a folder (or a Hub repository) back into the store, push a folder to the Hub."""
