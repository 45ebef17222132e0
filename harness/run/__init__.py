"""The run stages, in order: plan, preflight, launch, drive, judge, with provenance
(a suite in, a run record out).
"""
