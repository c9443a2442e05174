"""The media workload: chat requests carrying images or a video at a fixed concurrency."""
