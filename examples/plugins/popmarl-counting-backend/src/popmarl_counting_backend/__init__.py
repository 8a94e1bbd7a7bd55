"""Backend counting: the local backend, counting the tasks it runs (a popmarl plugin example)."""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against
