"""TB2-lite comparison lab: replay, score, store and compare small terminal agents."""
__version__ = "0.1.0"
