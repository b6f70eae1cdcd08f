"""Priority packer (OR-Tools CP-SAT)."""
