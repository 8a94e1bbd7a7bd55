"""Core builtin components, registered through core's own entry points."""
