"""The pure core: synchronous, deterministic, free of I/O and of the wall clock."""
