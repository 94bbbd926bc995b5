"""The result-file format (SPEC §8): schema, validation, reading and writing; one home for every layer above."""
