"""The Kubernetes LeaderWorkerSet manifest: one group of `nnodes` pods, the leader node 0
of the engine's own multi-node launch, each worker its node by LWS's index; the server on
the pod's own address; secrets from a Secret, never in the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def manifest(tmp_path: Path, topology: str, extra: str = "") -> tuple[str, list[dict]]:
    text = (ROOT / "suites" / "tiny_ngram_sglang_cpu.toml").read_text().replace(
        "[topology]\ngpus = 0\n", f"[topology]\ngpus = 0\n{topology}\n").replace(
        '"--skip-server-warmup",', f'"--skip-server-warmup",{extra}')
    path = tmp_path / "k.toml"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(path), "--launcher",
                           "kubernetes", "--dry-run", "--sglang", "sglang==0.5.23"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    body = done.stdout[done.stdout.index("---"):done.stdout.index("\ntarget ")]
    documents = [json.loads(part) for part in body.split("---") if part.strip()]
    return done.stdout, documents


def test_two_nodes_make_one_group_of_two_pods(tmp_path: Path) -> None:
    shown, (lws, service) = manifest(tmp_path, "tp_size = 2\nnnodes = 2",
                                     ' "--api-key", "k8s-k3y",')
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["kind"] == "LeaderWorkerSet"
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    for role in ("leaderTemplate", "workerTemplate"):
        [container] = template[role]["spec"]["containers"]
        args = container["args"]
        assert args[args.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
        assert args[args.index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):20000"
        assert args[args.index("--host") + 1] == "$(POD_IP)"
        assert args[args.index("--api-key") + 1] == "$(HARNESS_SECRET_0)"
        names = {e["name"]: e for e in container["env"]}
        assert names["HARNESS_SECRET_0"]["valueFrom"]["secretKeyRef"]["key"] == \
            "HARNESS_SECRET_0"
        assert "PYTHONPATH" not in names  # a host path means nothing in a container
    assert template["leaderTemplate"]["spec"]["containers"][0]["readinessProbe"]
    assert service["spec"]["selector"]["role"] == "leader"
    assert "k8s-k3y" not in shown
    assert "kubectl create secret generic" in shown


def test_one_node_is_a_group_of_one(tmp_path: Path) -> None:
    _, (lws, _) = manifest(tmp_path, "dp_size = 2")
    template = lws["spec"]["leaderWorkerTemplate"]
    # the CRD requires a worker template even where the group has no worker
    assert template["size"] == 1 and "workerTemplate" in template
    args = template["leaderTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--dp-size") + 1] == "2"


def test_without_a_dry_run_it_says_how_to_apply_and_measure(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "run", "tiny_ngram_sglang_cpu",
                           "--launcher", "kubernetes"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2
    assert "--dry-run" in done.stderr and "--server URL" in done.stderr
