"""The finished-job record file the operator writes and training reads: JSON Lines, one row per job.

The operator (netsched.records.writer) appends rows; netsched.records.reader reads them and
`netsched train` turns them into dataset rows (netsched.training.record_rows). All agree on
this version.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
ROW_FIELDS = {
    "schema_version": "int, this file format's version",
    "uid": "the GPUJob's metadata.uid (unique key)",
    "namespace": "str", "name": "str",
    "recorded_at": "RFC 3339 time the row was written",
    "outcome": "Succeeded or Failed", "reason": "the terminal condition's reason",
    "created": "RFC 3339", "start_time": "RFC 3339 or null (never ran)", "completion_time": "RFC 3339",
    "duration_seconds": "completion - start: the label to learn (null if never started)",
    "queue_seconds": "start - created (null if never started)",
    "replicas": "int", "gpus_per_replica": "int", "gpus": "int", "min_available": "int",
    "priority_class": "str or null", "failures": "pod failures during the run",
    "workload_kind": "training, inference, etl or batch", "input_size_gb": "float or null",
    "communication_intensity": "low, medium, high or null",
    "communication_gb_per_hour": "GB a replica exchanges per hour (spec.workload.communicationGBPerHour) or "
                                 "null; absent from records written before it existed",
    "expected_duration_seconds": "int or null", "expected_steps": "int or null",
    "data_kind": "node, a level of `topology`, endpoint or null", "data_location": "str or null",
    "data_size_gb": "float or null",
    "data_distance": "finest level every replica shares with the data: node, a level of `topology`, far "
                     "or null",
    "nodes": "node of each replica, by replica index",
    "racks": "the domain of each replica at the narrowest level of `topology` (its rack by default)",
    "zones": "the domain of each replica at the widest level of `topology` (its zone by default)",
    "topology": "the operator's --topology when the row was written (NAME=LABEL,..., widest first); absent "
                "from older records: netsched's zone=topology.kubernetes.io/zone,rack=netsched.io/rack",
    "domains": "level name -> the domain (label value, \"\" if none) of each replica; absent from older "
               "records, whose levels are zone and rack (the zones and racks columns)",
    "gpu_models": "GPU product of each replica's node",
    "gpu_labels": "the GPU capability labels (labels.GPU_LABELS) of each replica's node; absent from older "
                  "records",
    "distinct_nodes": "int", "distinct_racks": "int (of the racks column)",
    "distinct_zones": "int (of the zones column)",
    "telemetry": "links of the last replica at job start (records/link_columns.py: model feature "
                 "name -> value), or null without --prometheus-url",
    "first_forecast": "the job's first forecast (status.firstForecast: at, start, completion and their "
                      "P10/P90 as played, RFC 3339) or null (never forecast); absent from records written "
                      "before it existed",
}

