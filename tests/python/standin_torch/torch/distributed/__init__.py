"""torch.distributed, standing in (tests/python/standin_torch)."""
