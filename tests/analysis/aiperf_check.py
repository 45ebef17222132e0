"""Run inside AIPerf's own environment: each line of a profile_export.jsonl parsed as
AIPerf's loader parses it (`MetricRecordInfo.model_validate_json`, aiperf/plot/core/
data_loader.py) and each metric tag looked up in AIPerf's registry, its unit its display
unit. Prints one JSON object: lines read, tags seen, problems."""

import json
import sys

from aiperf.common.enums import MetricFlags
from aiperf.common.models.record_models import MetricRecordInfo
from aiperf.metrics.metric_registry import MetricRegistry

problems, tags, lines = [], set(), 0
with open(sys.argv[1], encoding="utf-8") as handle:
    for number, line in enumerate(handle, start=1):
        lines += 1
        try:
            record = MetricRecordInfo.model_validate_json(line)
        except Exception as error:
            problems.append(f"line {number}: {error}")
            continue
        for tag, value in record.metrics.items():
            tags.add(tag)
            metric = MetricRegistry.get_class(tag)
            unit = str(metric.display_unit or metric.unit)
            if value.unit != unit:
                problems.append(f"line {number}: {tag} in {value.unit!r}, AIPerf's {unit!r}")
            if metric.has_flags(MetricFlags.NO_INDIVIDUAL_RECORDS):
                problems.append(f"line {number}: {tag} is never a per-request metric")
print(json.dumps({"lines": lines, "tags": sorted(tags), "problems": problems}))
