"""The `stream-ctx` command line: one module per subcommand."""
