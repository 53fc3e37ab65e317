"""The async shell: Kafka I/O, state persistence, the runner and the command line."""
