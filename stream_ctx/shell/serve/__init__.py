"""`stream-ctx serve`: the latest bundles of the output topic, over HTTP and MCP."""
