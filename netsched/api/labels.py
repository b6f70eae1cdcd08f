"""The labels and annotations netsched's components agree on.

The operator writes them on the pods it creates; the extender reads them (any pod
may also carry them by hand). Their values are read by netsched.api.annotations (one reader each, the
one place their rules are); their meaning is documented in netsched/extender/plugins/ (each plugin
folder) and README.md.
"""

PREFIX = "netsched.io/"
SCHEDULER_NAME = "netsched"  # the scheduler profile GPUJob pods name (the chart's scheduler.name)
GPU_RESOURCE = "nvidia.com/gpu"
GANG_OPT_IN_LABEL = PREFIX + "gang-scheduling"  # a namespace whose pods the gang-gate webhook gates has it...
GANG_OPT_IN_VALUE = "enabled"  # ...with this value (the chart's default scope)

# Node labels netsched reads: the well-known topology labels, its own rack label, and the GPU
# product label NVIDIA GPU feature discovery sets.
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
RACK_LABEL = PREFIX + "rack"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_MIB_LABEL = "nvidia.com/gpu.memory"  # MiB, as GPU feature discovery sets it
# A node's GPU capability, overriding what netsched's GPU table says of its product (netsched.models.gpus)
GPU_TFLOPS_LABEL = PREFIX + "gpu-tflops"  # dense bf16/fp16 TFLOPS
GPU_TFLOPS_FP32_LABEL = PREFIX + "gpu-tflops-fp32"
GPU_MEMORY_BANDWIDTH_LABEL = PREFIX + "gpu-memory-bandwidth-gbps"
GPU_MEMORY_GIB_LABEL = PREFIX + "gpu-memory-gib"
GPU_LABELS = (GPU_TFLOPS_LABEL, GPU_TFLOPS_FP32_LABEL, GPU_MEMORY_BANDWIDTH_LABEL, GPU_MEMORY_GIB_LABEL,
              GPU_MEMORY_MIB_LABEL)  # what a node's GPU capability is read from besides its product

JOB_LABEL = PREFIX + "job"  # the GPUJob (or any group of pods) a pod belongs to
REPLICA_LABEL = PREFIX + "replica"  # the pod's replica index in its GPUJob
ATTEMPT_LABEL = PREFIX + "attempt"  # 0 for a replica's first pod, +1 for each replacement
RELEASED_BY = PREFIX + "released-by"  # annotation: the PackingPlan that lifted a pod's gang gate
PINNED_NODE = PREFIX + "pinned-node"  # annotation: the node its gang's placement pinned a pod to at release
# annotation on each gated pod of a pod gang that cannot go on as it is (never fits, bad annotations):
# "<reason>: <message>", the Blocked state of a workload whose object netsched does not write
GANG_BLOCKED = PREFIX + "gang-blocked"
# pod annotation: the PackingPlan whose end freed the room its last scheduling attempt was refused for;
# the update makes kube-scheduler try the pod again now rather than at its next periodic flush
ROOM_FREED_BY = PREFIX + "room-freed-by"
EVICTED_BY = PREFIX + "evicted-by"  # GPUJob annotation: the PackingPlan that last evicted its pods (JSON)
# Annotations the operator writes on a workload that is not a GPUJob (a batch Job, ...) where a
# GPUJob has status fields: when its gang is predicted to start and finish (RFC 3339, UTC).
PREDICTED_START = PREFIX + "predicted-start"
PREDICTED_FINISH = PREFIX + "predicted-finish"
# the 80% interval around each: "<annotation>-p10" and "<annotation>-p90"
PREDICTED_START_RANGE = (PREDICTED_START + "-p10", PREDICTED_START + "-p90")
PREDICTED_FINISH_RANGE = (PREDICTED_FINISH + "-p10", PREDICTED_FINISH + "-p90")

MAX_PEER_DISTANCE = PREFIX + "max-peer-distance"
DATA_SOURCE = PREFIX + "data-source"
MAX_DATA_DISTANCE = PREFIX + "max-data-distance"
JOB_GPUS = PREFIX + "job-gpus"
MAX_PEER_RTT_MS = PREFIX + "max-peer-rtt-ms"
MIN_PEER_BANDWIDTH_MBPS = PREFIX + "min-peer-bandwidth-mbps"
MAX_DATA_RTT_MS = PREFIX + "max-data-rtt-ms"
MIN_DATA_BANDWIDTH_MBPS = PREFIX + "min-data-bandwidth-mbps"

# Workload hints for the completion-time model (GPUJob spec.workload; any pod may carry them)
REPLICAS = PREFIX + "replicas"
WORKLOAD_KIND = PREFIX + "workload-kind"  # training, inference, etl or batch
INPUT_SIZE_GB = PREFIX + "input-size-gb"
COMMUNICATION = PREFIX + "communication-intensity"  # low, medium or high
COMMUNICATION_GB_PER_HOUR = PREFIX + "communication-gb-per-hour"  # GB a replica exchanges per hour
EXPECTED_SECONDS = PREFIX + "expected-duration-seconds"
PROTECTED = PREFIX + "protected"  # "true": the packer never moves the pod


def whole_number(value: str | None) -> int | None:
    """A plain ASCII whole number ("12"), else None. str.isdigit() is no guard: it accepts "²", which
    int() refuses, and int() reads "١٢" and "1_2" as 12."""
    return int(value) if value and value.isascii() and value.isdigit() else None
