"""GPUJob operator (kopf): one process running its loops (netsched.operator.manager).

Each loop is a sub-package (gpujobs, pod_gangs, webhook, forecaster, packing); they share only the
modules at this level, never each other."""

COMPONENT = "netsched-operator"  # the component every loop's Events are reported by
