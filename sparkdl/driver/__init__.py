"""Driver side: cluster lifecycle (pre-flight checks, reservation, shutdown)."""
