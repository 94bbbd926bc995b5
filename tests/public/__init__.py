"""Public mode: visitors, limits, proxies, the Space image."""
