"""Data plane (InputMode.SPARK): rows from Spark tasks to the nodes, exactly once, and results back."""
