"""The Compare tab: one replay step, every engine's answer side by side, audits, samples and what-ifs."""
