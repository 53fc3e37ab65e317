"""The HTTP server: Prometheus metrics, health probes and the live inspector."""
