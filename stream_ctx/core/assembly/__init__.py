"""A finalize's context: the items that fit a budget (`assembler`), the dedup graph (`dag`),
deltas and the full bundle they stand for (`delta`, `rebuild`), prefix reuse and cache
breakpoints (`prefix`), what one finalize keeps for the next (`learning`), and the bundle built
once (`finalize`)."""
