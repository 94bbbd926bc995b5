"""lab/published: catalogue, series, fetch, hostile servers."""
