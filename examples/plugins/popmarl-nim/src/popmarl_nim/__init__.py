"""Env nim: a pile of stones, take one to three, who takes the last one wins (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
