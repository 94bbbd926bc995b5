"""The Results tab: the leaderboard and its plots."""
