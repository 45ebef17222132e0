"""Protocols over runs: each runs one or more whole runs (`harness.run.runner.run_suite`)
and ends in the judge's outcome (`harness.run.judge`).

- `pairing`: A/B paired by question (`harness run --against`): the reference build A
  (reused when a stored run is the same measurement, `harness.run.identity`), then B,
  judged with the paired gate on B's rows;
- `sweep`: `harness sweep`: the concurrency points as entries of one launch, the gate
  against concurrency 1;
- `forced`: `harness forced`: speed with the acceptance forced through the engine's own
  knob at a ladder of accept lengths, a launch per point, the break-even accept length;
- `soak`: `harness soak`: the workload repeated on one launch for a set time, accept
  length per window of serving time, the drift gate on its trend;
- `forced_split`: `harness forced --against`: a speedup drop of B against A split into
  the system's share (speed at equal forced acceptance) and the draft's (real accept
  length), each judged by its own tolerance;
- `calibrate`: `harness calibrate`: N runs of one build on this host, the floor and
  tolerance they suggest;
- `bisect/`: `harness bisect`: the engine commit that moved accept length, each step a
  run under the bisect's paired sequential rule.

Not here, because each is part of one run: the target alone for `[speedup]`
(`harness.run.baseline`, measured inside the run and kept in its record), the sequential
rule (`harness.run.sequential`, the run's own stop rule) and `--server URL`
(`harness.run.attach`, the launch stage for a server someone else started).
"""
