"""Node side: what runs on an executor (launch task, supervisor, TF process, ctx)."""
