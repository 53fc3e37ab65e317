"""Conversations: where each stands in its life, held, released or gone (`lifecycle`); applying
events to their windows and building bundles (`processor`); what a conversation persists
(`changes`)."""
