"""Conversation state: the changelog fold, its restore, and the checkpoint that commits it."""
