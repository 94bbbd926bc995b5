"""The Engines tab: add, watch, restart and unload engines."""
