"""The packer's kopf handlers (netsched.packer runs without kopf)."""
