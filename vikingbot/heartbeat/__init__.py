"""heartbeat."""
