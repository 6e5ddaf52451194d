"""gpu_experiments package."""
