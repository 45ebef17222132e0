"""Figures from request rows: the accept-length definitions, the per-category and
per-position breakdowns, the statistics.
"""
