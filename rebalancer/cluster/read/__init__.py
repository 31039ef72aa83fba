"""Reading a cluster or a snapshot file into the model: LIST, WATCH, decoders."""
