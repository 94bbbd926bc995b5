"""What a public deployment hides or refuses: server paths in messages, visitor writes."""
