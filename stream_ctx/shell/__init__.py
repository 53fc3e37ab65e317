"""The async shell around the pure core: Kafka I/O (kafka/), state (state/), the processor
(processing/), the HTTP server (http/), `stream-ctx serve` (serve/) and the CLI (commands/)."""
