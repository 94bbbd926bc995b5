"""lab/ui: tab handlers and renders, without a browser."""
