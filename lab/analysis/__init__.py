"""What the lab judges from stored runs: paired comparisons with intervals and detectable effects, one baseline
against many, each run's chance of being the best, checkpoint series, the planner, and the commands that print
them (`compare`, `plan`). It reads the store (lab.store) and computes with lab.scoring's statistics."""
