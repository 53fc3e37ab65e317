"""Kafka I/O: the clients, topic administration, fetching, dead letters, the embedded broker."""
