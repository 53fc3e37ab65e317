"""Conversations: applying events to their windows and building bundles (`processor`), and what a
conversation persists (`changes`)."""
