"""Analysis of stored runs: comparisons, trends, plots, simulations.
"""
