"""Tracker csv: each iteration's metrics as one row of a CSV file (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
