"""One run of a suite, its stages in order (a suite in, a run record out); `runner.py`
ties them together (`run_suite`):

1. plan: `plan.py` (the build, the engine's launch line, the models), `checkpoint_folder.py`,
   `dry_run.py` (the `--dry-run` text), `draft_attention.py` (the draft's contract as the
   build resolves it, before any launch);
2. preflight: `preflight.py` (the GPUs, the topology's fit);
3. launch: `launch.py` (the server's process tree), `schedulers/` (a topology's processes),
   or `attach.py` (`--server URL`: a server someone else started);
4. drive: `drive.py` (+ `dispatch.py`, `streaming.py`), `heartbeat.py` (progress lines);
5. measure: `measuring.py` (an entry's measured phase), `sequential.py` (the run's stop
   rule), `baseline.py` (`[speedup]`: the target alone, after the run's server stopped),
   and the runtime contract it records: `runtime_attention.py`, `runtime_contract.py`
   (what reached the draft at run time, against `draft_attention.py`'s audit);
6. judge: `judge.py` (+ `evidence.py`: the paired gate's finding it reads), `exit_codes.py`
   (every exit code the harness decides, and the one severity rule), `outcome.py` (the
   run's options and its outcome);
7. record: `entry_run.py` (an entry's state and run.json), `recorded.py`, `provenance.py`,
   `identity.py`, `workload_record.py`.

The protocols over several runs (A/B pairing, sweep, calibrate, bisect) are in
`harness.protocols`.
"""
