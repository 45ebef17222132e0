"""The suite model: a suite file, its workload entries, listing, the attention it
expects, and which of its values are secret.
"""
