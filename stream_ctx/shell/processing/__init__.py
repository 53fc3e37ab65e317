"""The stream processor: a consumer-group member that turns input records into bundles."""
