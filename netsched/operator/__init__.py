"""GPUJob operator (kopf), with the packer controller."""
