"""The operator's mutating admission webhooks (the gang gate and the hard limits), served by every replica."""
