"""GPUJob operator (kopf). Lands with issue 4."""
