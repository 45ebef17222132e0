"""`harness bisect`: find the engine commit that moved accept length, with few requests.

- `rule`: the paired sequential classification of a commit against GOOD (statistics);
- `search`: which commit to test next, with skips (like `git bisect`);
- `session`: the session on disk (session.json, the steps journal), commits to bisect;
- `steps`: one measurement, a normal run record with the bisect's rule;
- `driver`: endpoints, steps, extensions, resume;
- `report`: the result, its text and its PNG.
"""

from __future__ import annotations

# Exit codes of `harness bisect` beyond the common ones (harness.errors.ExitCode, which
# uses 0-5 and 130).
EXIT_NO_DIFFERENCE = 6  # GOOD and BAD do not differ significantly: nothing to bisect
EXIT_NOT_NARROWED = 7  # skipped or undecided commits leave several candidates
