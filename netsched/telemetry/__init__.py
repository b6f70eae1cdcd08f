"""Network telemetry: the per-node agent, its probes, and the store the extender and operator read."""
