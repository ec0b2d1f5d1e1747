"""once's Jepsen history checker (Python 3 standard library only)."""
