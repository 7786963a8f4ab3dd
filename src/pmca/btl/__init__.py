"""btl framework."""
