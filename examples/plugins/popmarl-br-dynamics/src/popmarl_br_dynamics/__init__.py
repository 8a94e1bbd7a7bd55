"""Scenario best_response_dynamics: every population answers the others' newest policy (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
