"""lab/engines: engine kinds, pool, managed servers, presets, vLLM on CPU."""
