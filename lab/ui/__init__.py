"""The Gradio UI: the shell every tab shares, one package per tab, and the assembly that builds the Blocks."""
