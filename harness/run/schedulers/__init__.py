"""Launching a topology: the engine's own multi-process launch on this host, a Slurm job, a
Kubernetes LeaderWorkerSet manifest; each from the lines of `deployment`."""
