"""Parse an OpenMetrics exposition (stdin) with the official Prometheus client's parser and
print it as JSON: {"types": {family: type}, "samples": [[name, labels, value], ...]}.

The parser is strict (it refuses a malformed exposition, buckets out of order, a missing
`# EOF`), so a parse that succeeds is itself part of the check."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

types = {}
samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    types[family.name] = family.type
    for sample in family.samples:
        samples.append([sample.name, dict(sample.labels), sample.value])
json.dump({"types": types, "samples": samples}, sys.stdout)
