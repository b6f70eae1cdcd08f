"""GPUJob operator (kopf): the GPUJob controller's wiring, and the process that runs the packer."""
