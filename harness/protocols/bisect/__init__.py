"""`harness bisect`: find the engine commit that moved accept length, with few requests.

- `rule`: the paired sequential classification of a commit against GOOD (statistics);
- `search`: which commit to test next, with skips (like `git bisect`);
- `session`: the session on disk (session.json, the steps journal), commits to bisect;
- `steps`: one measurement, a normal run record with the bisect's rule;
- `driver`: endpoints, steps, extensions, resume;
- `report`: the result, its text and its PNG.

Its exit code (0 found, 6 no difference, 7 not narrowed: `harness.errors.ExitCode`) is
decided by `harness.run.exit_codes.bisect_exit`.
"""

from __future__ import annotations
