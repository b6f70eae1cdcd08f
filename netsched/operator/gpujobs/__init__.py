"""The GPUJob controller: one kopf timer per unfinished GPUJob reconciles it."""
