"""Priority packer (OR-Tools CP-SAT). Lands with issue 7."""
