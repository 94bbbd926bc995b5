"""The house's own rules: layers, the CLI's light imports, the markers."""
