"""attrs validators for component configs, shared by core and the plugins.

Typed ``Any``: one validator serves int and float fields alike (attrs types ``ge(0)`` as
an int validator). Their messages name the bound: ``must be >= 0, got -1``.
"""

from __future__ import annotations

from typing import Any

import attrs

#: ``>= 0``.
non_negative: Any = attrs.validators.ge(0)
#: ``> 0``.
positive: Any = attrs.validators.gt(0)
#: ``>= 1``: counts and sizes.
at_least_one: Any = attrs.validators.ge(1)
#: In ``[0, 1]``: probabilities, discount factors, mixing weights.
unit_interval: Any = attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(1))
#: A list of hidden-layer widths, each ``>= 1``.
layer_widths: Any = attrs.validators.deep_iterable(member_validator=at_least_one)


def optional(validator: Any) -> Any:
    """``validator``, or ``None``."""
    return attrs.validators.optional(validator)
