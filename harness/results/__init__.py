"""The results store: the run record and its rows, the folder layout, the writer, the
index, the loader and the baselines.
"""
