"""popmarl-reservoir: scenario ``reservoir_self_play``, written against popmarl's public
task protocol only and registered by an entry point (see pyproject.toml)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__version__ = "0.1.0"
