"""The one id-level meta-strategy: per-seat mixtures, a joint over some seats, and the
views of it that tasks, the engine and loaded runs take."""

from __future__ import annotations

import numpy as np
import pytest

from popmarl.data.meta_strategy import MetaStrategy
from popmarl.engine.seating import OpponentDraw
from popmarl.interfaces.env import correlated_profile, mixed_profile

JOINT = MetaStrategy.correlated(("a", "b"), (("a/0", "b/0"), ("a/1", "b/1"), ("a/1", "b/0")), [0.5, 0.25, 0.25])


def test_a_correlated_meta_strategy_keeps_its_marginals_as_the_seats_mixtures() -> None:
    assert JOINT.support("a") == [("a/0", 0.5), ("a/1", 0.5)]
    assert JOINT.support("b") == [("b/0", 0.75), ("b/1", 0.25)]
    assert JOINT.alone == () and JOINT.joint_support()[0] == (("a/0", "b/0"), 0.5)


def test_supports_leave_out_zero_weights() -> None:
    meta = MetaStrategy.independent({"a": (["a/0", "a/1", "a/2"], [0.0, 2.0, 1.0])})
    assert meta.support("a") == [("a/1", 2.0), ("a/2", 1.0)] and meta.named() == ["a/1", "a/2"]


def test_for_seats_marginalises_the_joint_onto_the_seats_kept() -> None:
    merged = MetaStrategy.merged(JOINT, MetaStrategy.pure({"c": "c/0"}))
    part = merged.for_seats(["c", "b"])
    assert part.agents == ("b", "c") and part.joint_agents == ("b",) and part.alone == ("c",)
    assert part.profiles == (("b/0",), ("b/1",), ("b/0",))  # kept apart: the whole joint's draws
    assert part.probabilities.tolist() == [0.5, 0.25, 0.25]
    assert merged.without("a").agents == ("b", "c")
    assert merged.without("a").without("b").joint_agents == () and merged.marginals().joint_agents == ()


def test_draw_takes_the_joint_profile_whole() -> None:
    rng = np.random.default_rng(0)
    drawn = {tuple(JOINT.draw(rng).values()) for _ in range(300)}
    assert drawn == {("a/0", "b/0"), ("a/1", "b/1"), ("a/1", "b/0")}  # never (a/0, b/1)


def test_renamed_prefixes_every_id() -> None:
    renamed = JOINT.renamed("x:")
    assert renamed.policy_ids[0] == ("x:a/0", "x:a/1") and renamed.profiles[0] == ("x:a/0", "x:b/0")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"agents": ("a", "a"), "policy_ids": (("a/0",), ("a/0",)), "mixtures": ([1.0], [1.0])}, "seats must differ"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([1.0, 0.0],)}, "one non-negative number per"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([-1.0],)}, "one non-negative number per"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([0.0],)}, "positive sum"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([1.0],), "joint_agents": ("b",),
      "profiles": (("b/0",),), "probabilities": [1.0]}, "joint seats b must be distinct seats"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([1.0],), "joint_agents": ("a",),
      "profiles": (("a/9",),), "probabilities": [1.0]}, "names a/9 for seat a, outside its mixture"),
    ({"agents": ("a",), "policy_ids": (("a/0",),), "mixtures": ([1.0],), "profiles": (("a/0",),)},
     "profiles without joint seats"),
])
def test_an_inconsistent_meta_strategy_is_refused_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        MetaStrategy(**kwargs)
    assert "\n" not in str(raised.value)


def test_the_live_forms_name_the_same_policies() -> None:
    merged = MetaStrategy.merged(JOINT.for_seats(["b"]), MetaStrategy.independent({"c": (["c/0", "c/1"], [0, 1])}))
    live = {pid: object() for pid in ("a/0", "a/1", "b/0", "b/1", "c/0", "c/1")}
    assert mixed_profile(merged, live.__getitem__) == {"c": [(live["c/1"], 1.0)]}
    correlated = correlated_profile(merged, live.__getitem__)
    assert correlated is not None and [p for _, p in correlated] == [0.5, 0.25, 0.25]
    assert correlated[1][0] == {"b": live["b/1"]}
    assert correlated_profile(merged.marginals(), live.__getitem__) is None
    draw = OpponentDraw.of(merged, live.__getitem__)
    assert set(draw.seats) == {"c"} and draw.joint is not None and draw.joint[0] == ("b",)
    assert draw.names[id(live["c/1"])] == "c/1"
