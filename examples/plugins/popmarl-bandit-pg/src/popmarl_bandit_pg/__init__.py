"""Algorithm bandit_pg: a softmax over actions learned by policy gradient (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
