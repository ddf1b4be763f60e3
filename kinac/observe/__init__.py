"""Seeing inside a run: per-kernel profiles and traces (:mod:`kinac.observe.profile`).

Metrics live in :mod:`kinac.metrics`. Nothing here is imported unless asked for, so the
runtime's normal path pays nothing for it.
"""
