"""The version of :mod:`popmarl.api`, separate from the package's.

``MAJOR.MINOR``: the major version changes when a name is removed from the API or changes
meaning, the minor one when names are added. A plugin declares the version it was built
against as a string literal in its top-level package (or single module)::

    POPMARL_API = "2.0"

written out, not read from :data:`API_VERSION` (which would always match). ``popmarl
plugins --check`` imports each entry point and reads that declaration: another major
version than this popmarl's fails the check with one line naming the distribution, its
version and both API versions; a package that declares none is reported as undeclared
without failing (:mod:`popmarl.plugins.api_version` defines both and the verdict).
"""

from popmarl.plugins.api_version import API_VERSION as API_VERSION
