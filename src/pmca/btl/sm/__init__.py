"""btl/sm: shared memory between processes of one host."""
