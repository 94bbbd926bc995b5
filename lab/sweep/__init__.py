"""The cluster sweep: many engines (a checkpoint series, shards of one engine) replayed as Ray actors (DESIGN §4)."""
