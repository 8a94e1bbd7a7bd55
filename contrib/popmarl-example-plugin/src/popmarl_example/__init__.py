"""popmarl-example-plugin: a custom algorithm (``softmax_br``) and a custom meta-solver
(``hedge``), registered with popmarl by entry points only (see pyproject.toml).

Nothing here is imported by ``popmarl plugins``; popmarl imports a module when a config
names its component.
"""

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__version__ = "0.1.0"
