"""The published runs' panel (shown under the Results leaderboard)."""
