"""Entries: the lean format's headers and the naive baseline (`render`), an item's entry from its
plan (`entry`), entries placed in a context order (`placement`), and a context read back
(`reader`)."""
