"""The runtime: the engine that drives runs and the one writer of each step."""
