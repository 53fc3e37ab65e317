"""The pure core: synchronous, deterministic, free of I/O and of the wall clock.

Its rooms, each importing only from the rooms above it in this list
(`tests/core/test_import_graph.py` holds the order):

- `wire/`: the event and bundle wire types and their codecs.
- `counting/`: exact token counts, cut into segments that are counted once.
- `memo.py`: the memo tables a processor owns and hands down.
- `window/`: a conversation's bounded window, its scoring and its configuration.
- `text/`: texts cut into lines and sentences, their repeats and reruns found and planned (the
  Python reference and its compiled twin).
- `entries/`: how a planned item is written as an entry, placed in a context, and read back.
- `assembly/`: a finalize: the items that fit a budget, the dedup graph, deltas, cache breakpoints.
- `conversation/`: applying events to conversations and what a conversation persists.
- `caches.py`: the memo tables' figures for the metrics.
"""
