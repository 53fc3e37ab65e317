"""Exact token counts: the BPE tokenizers (`tokenizer`) and the segments a context is cut into so
each is counted once (`segment`)."""
