"""The shell every tab shares: the lab context, sessions, public-mode rules, HTML text helpers."""
