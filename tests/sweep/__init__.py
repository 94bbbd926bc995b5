"""lab/sweep: the cluster sweep on Ray."""
