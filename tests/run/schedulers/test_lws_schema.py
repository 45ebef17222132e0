"""The printed LeaderWorkerSet against the LeaderWorkerSet CRD's own OpenAPI schema.

The CRD (`config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml` of
kubernetes-sigs/lws) is in no package CI can install, and the project commits no copy of
another project's files, so this test reads it from `HARNESS_LWS_CRD` and is not part of
`nox -s tests` (run it with `HARNESS_LWS_CRD=<the CRD file> pytest
tests/run/schedulers/test_lws_schema.py`). The schema is checked as the API server checks it
with strict field validation (`kubectl apply --validate=strict`, the default): an object
the schema gives properties for takes no other field (the server would prune it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.run.schedulers.test_kubernetes import manifest


def strict(schema: Any) -> Any:
    """The CRD's structural schema as JSON Schema, unknown fields refused."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.get("type") == "object" and "properties" in out and \
            "additionalProperties" not in out and \
            not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def crd_schema() -> dict[str, Any]:
    path = os.environ.get("HARNESS_LWS_CRD")
    if not path:
        pytest.skip("HARNESS_LWS_CRD names no LeaderWorkerSet CRD file")
    import yaml

    crd = yaml.safe_load(Path(path).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return strict(version["schema"]["openAPIV3Schema"])


@pytest.mark.parametrize("topology", ["tp_size = 2\nnnodes = 2", "dp_size = 2"])
def test_the_manifest_meets_the_crd(tmp_path: Path, topology: str) -> None:
    import jsonschema

    schema = crd_schema()
    _, (lws, _) = manifest(tmp_path, topology, ' "--api-key", "k",')
    jsonschema.validate(lws, schema)
    broken = json.loads(json.dumps(lws))
    broken["spec"]["leaderWorkerTemplate"]["sise"] = 2  # a typo the server would prune
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
