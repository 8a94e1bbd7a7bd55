"""What a backend author may import besides :mod:`popmarl.api`: the engine a backend runs.

A backend executes the tasks a scenario emits; on any backend the same engine does the
work: an :class:`Executor` holds the frozen policies and the learners by key and answers
tasks, :func:`run_task` is the learner loop a train task runs (its learners update on what
a :class:`Feed` plays, until the budget), rollout workers (:class:`RolloutWorker`) step a
vector of games with :class:`Seating` and draw opponents with :class:`OpponentDraw`. A
backend that spreads the work (``ray``) provides its own feed and calls these pieces
where it places them.
"""

from popmarl.engine.executor import Executor as Executor
from popmarl.engine.learner_loop import Fed as Fed
from popmarl.engine.learner_loop import Feed as Feed
from popmarl.engine.learner_loop import Group as Group
from popmarl.engine.learner_loop import TeamWeights as TeamWeights
from popmarl.engine.learner_loop import run_task as run_task
from popmarl.engine.learners import Learner as Learner
from popmarl.engine.seating import OpponentDraw as OpponentDraw
from popmarl.engine.rollout import RolloutWorker as RolloutWorker
from popmarl.engine.seating import Seating as Seating
