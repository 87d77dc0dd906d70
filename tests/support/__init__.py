"""Test rigs and platform fakes for vikingbot's own suite and benches (not shipped)."""
