"""Housekeeping: history index, pruning, memory consolidation."""
