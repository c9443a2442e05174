"""The soak workload: low-rate mixed text and image traffic for minutes, reported per window."""
