"""popmarl-reservoir: scenario ``reservoir_self_play``, written against popmarl's public
task protocol only and registered by an entry point (see pyproject.toml)."""

__version__ = "0.1.0"
