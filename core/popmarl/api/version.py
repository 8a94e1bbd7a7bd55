"""The version of :mod:`popmarl.api`, separate from the package's.

It changes when a name is removed from the API or changes meaning (major) or when names
are added (minor). A plugin declares the major version it was built against in its
distribution's metadata (``[tool.popmarl] api = N``, read by ``popmarl plugins --check``).
"""

API_VERSION = "1.0"
