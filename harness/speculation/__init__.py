"""What speculative decoding can produce, whatever reads it: the most one verify step
makes under a suite's settings (`bounds`). Below every stage: the suite validator refuses
an impossible floor with it, and the results door refuses an impossible stored figure with
the same bound.
"""
