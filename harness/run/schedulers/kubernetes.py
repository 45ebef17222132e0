"""A topology as a Kubernetes LeaderWorkerSet (the `leaderworkerset.x-k8s.io/v1` API of
kubernetes-sigs/lws): `harness run SUITE --launcher kubernetes --dry-run` prints the
manifest, ready for `kubectl apply -f -`; the harness then measures the deployment through
its Service with `harness run SUITE --server URL` (nothing here talks to a cluster).

One group of `nnodes` pods: the leader runs node 0 of the engine's own multi-node launch
and serves HTTP, each worker its node, with `--node-rank` from the index LWS gives it
(`LWS_WORKER_INDEX`) and the rendezvous at the leader (`LWS_LEADER_ADDRESS`); Kubernetes
expands `$(VAR)` in a container's arguments from its environment. The server binds the
pod's own address (`POD_IP`, from the downward API), never every interface. A secret
(an `--api-key`, a token in `engine.env`) is never written into the manifest: it is read
from a Kubernetes Secret named after the suite (`kubectl create secret generic ...`, as
the manifest's comment says). The container image must hold the build under test.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.engines.interface import Placement
from harness.errors import BadInput
from harness.run.schedulers.deployment import Launchable, secret_variable, secret_words

if TYPE_CHECKING:
    from harness.suite.model import Suite

API_VERSION = "leaderworkerset.x-k8s.io/v1"
HTTP_PORT = 30000
DIST_PORT = 20000
NODE_VALUES = {"--host": "$(POD_IP)", "--port": str(HTTP_PORT),
               "--node-rank": "$(LWS_WORKER_INDEX)",
               "--dist-init-addr": f"$(LWS_LEADER_ADDRESS):{DIST_PORT}",
               "--master-addr": "$(LWS_LEADER_ADDRESS)", "--master-port": str(DIST_PORT)}


def resource_name(suite_name: str) -> str:
    """A DNS-1035 label from the suite's name."""
    name = "harness-" + "".join(c if c.isalnum() else "-" for c in suite_name.lower())
    return name[:52].rstrip("-")


def _container(args: list[str], env: list[dict[str, object]], image: str, gpus: int,
               leader: bool) -> dict[str, object]:
    container: dict[str, object] = {
        "name": "server", "image": image, "command": args[:1], "args": args[1:],
        "env": env,
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    if leader:
        container["ports"] = [{"containerPort": HTTP_PORT, "name": "http"}]
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": HTTP_PORT},
                                       "periodSeconds": 10, "failureThreshold": 360}
    return container


def manifest(engine: Launchable, suite: Suite, env: Mapping[str, str], image: str | None = None
             ) -> str:
    """The LeaderWorkerSet and its leader's Service, as a YAML stream (JSON documents,
    which YAML reads as they are) with the Secret to create named in a comment."""
    topology = suite.topology
    if topology.disaggregation is not None:
        raise BadInput(f"suite {suite.name}: the manifest is one LeaderWorkerSet serving one "
                       "server over nnodes; a prefill/decode split is two of them behind the "
                       "engine's router (not written by the harness): deploy it and measure "
                       "the router with --server URL")
    name = resource_name(suite.name)
    placement = Placement(node_rank=0, nnodes=topology.nnodes,
                          dist_init_addr="LEADER:1" if topology.nnodes > 1 else None)
    line = list(engine.command("HOST", 1, placement))
    secret = secret_words(line, suite.engine.kind)
    args: list[str] = []
    secret_env: list[str] = []
    for index, word in enumerate(line):
        previous = line[index - 1] if index else ""
        if previous in NODE_VALUES:
            word = NODE_VALUES[previous]
        elif secret[index]:
            key = f"HARNESS_SECRET_{len(secret_env)}"
            secret_env.append(key)
            word = f"$({key})"
        args.append(word)
    # the build's interpreter or console script by its host path: the image's own
    program = args[0].rsplit("/", 1)[-1]
    args[0] = "python3" if program.startswith("python") else program
    container_env: list[dict[str, object]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    for key, value in env.items():
        if key in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES"):
            continue  # host paths and devices: the image and the device plugin decide
        if secret_variable(key, value):
            secret_env.append(key)
        else:
            container_env.append({"name": key, "value": value})
    container_env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}
                      for key in secret_env]
    image = image or _image(engine)
    lws: dict[str, object] = {
        "apiVersion": API_VERSION, "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "spec-harness"}},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": topology.nnodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": {"role": "leader"}},
                    "spec": {"containers": [_container(args, container_env, image,
                                                       topology.gpus, leader=True)]}},
                "workerTemplate": {
                    "spec": {"containers": [_container(args, container_env, image,
                                                       topology.gpus, leader=False)]}},
            },
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{name}-leader"},
        "spec": {"selector": {"leaderworkerset.sigs.k8s.io/name": name, "role": "leader"},
                 "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT}]},
    }
    header = [f"# {suite.name}: {topology.parallel_text()} as a LeaderWorkerSet "
              f"(group size {topology.nnodes}).",
              f"# Apply: kubectl apply -f <this file>; measure: harness run {suite.name} "
              f"--server http://{name}-leader:{HTTP_PORT}"]
    if secret_env:
        header.append(f"# First: kubectl create secret generic {name} "
                      + " ".join(f"--from-literal={key}=..." for key in secret_env))
    return "\n".join([*header, "---", json.dumps(lws, indent=2), "---",
                      json.dumps(service, indent=2)])


def _image(engine: Launchable) -> str:
    """SGLang's own image for a released build, else a placeholder to fill in."""
    spec = getattr(engine, "spec_text", None) or ""
    if spec.startswith("sglang=="):
        return f"lmsysorg/sglang:v{spec.split('==', 1)[1]}"
    return "<an image with the build under test>"
