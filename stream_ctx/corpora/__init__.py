"""Sample text for the demo, the tests and the benchmarks, seeded: synthetic conversations
(workload), docstrings (realtext, numpy's need the `corpora` extra), code reading (codetext)."""
