"""Solver regret_matching: the average strategies of regret matching on the meta-game (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
