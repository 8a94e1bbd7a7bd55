"""A team learner's seats, and the joint view as the ``[rows, seats, ...]`` tensors TorchRL reads.

A trainer's team is the seats its learner plays (:attr:`popmarl.api.TrainerContext.own_seats`:
every seat of a ``shared`` population, or every member's seats of a ``per_player`` team),
each played by its population's policy. Seats may differ in spaces (mpe2's speaker and
listener): observations are zero-padded to the widest, discrete actions to the most
(padded actions are illegal), so one ``[T, n_seats, ...]`` tensordict holds the team.
The centralized input (:meth:`Team.state`) is the env's global state where it has one,
else every seat's observation concatenated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from popmarl.api import Box, Discrete, JointEpisodes, Policy, TrainerContext
from popmarl_torch.features import action_dim, feature_dim
from popmarl_torch.policies import TorchPolicy


class Team:
    """The seats a trainer learns for, their populations' policies and the padded widths."""

    def __init__(self, context: TrainerContext) -> None:
        self.seats = tuple(context.own_seats)
        self.all_seats = tuple(context.seats)
        self.n = len(self.seats)
        population_of = {seat: p for p, space in context.spaces.items() for seat in space.agents}
        self.populations = tuple(dict.fromkeys(population_of[s] for s in self.seats))
        self.policies: dict[str, TorchPolicy] = {}
        for population in self.populations:
            policy: Policy = context.policies[population]
            if not isinstance(policy, TorchPolicy):
                raise TypeError(f"population {population}: expected a popmarl_torchrl policy, got {type(policy).__name__}")
            self.policies[population] = policy
        self.population_of = {seat: population_of[seat] for seat in self.seats}
        self.obs_dims = [feature_dim(context.seats[s][0]) for s in self.seats]
        action_spaces = [context.seats[s][1] for s in self.seats]
        self.discrete = all(isinstance(a, Discrete) for a in action_spaces)
        self.action_widths = [action_dim(a) for a in action_spaces]
        self.max_obs, self.max_actions = max(self.obs_dims), max(self.action_widths)
        self.action_shape = () if self.discrete else action_spaces[0].shape
        self.has_state = context.state_space is not None
        self.state_dim = (int(np.prod(context.state_space.shape, dtype=int)) if context.state_space is not None
                          else sum(feature_dim(obs) for obs, _ in context.seats.values()))
        #: Per population: its seats' positions in the team and their ids within the population.
        self.groups = {p: ([j for j, s in enumerate(self.seats) if population_of[s] == p],
                           [self.policies[p].seats.index(s) for s in self.seats if population_of[s] == p])
                       for p in self.populations}

    def columns(self, games: JointEpisodes) -> list[int]:
        """Each team seat's position in ``games.seats``."""
        return [games.seats.index(s) for s in self.seats]

    # -- rows -------------------------------------------------------------------------------
    def valid(self, games: JointEpisodes) -> np.ndarray:
        """``[T, n]``: the rows where the team's seat acted and the learner played it."""
        game = games.game_of_row
        return np.stack([games.rows[s].acted & games.own[game, k] for s, k in zip(self.seats, self.columns(games))],
                        axis=1)

    def obs(self, games: JointEpisodes, final: bool = False) -> np.ndarray:
        """``[T, n, max_obs]`` observations (``final``: ``[G, n, max_obs]`` at each game's cut,
        zeros where the seat was not in play), zero-padded."""
        rows = len(games) if final else games.steps
        out = np.zeros((rows, self.n, self.max_obs), np.float32)
        for j, seat in enumerate(self.seats):
            if final:
                for g, cut in enumerate(games.rows[seat].final_obs):
                    if cut is not None:
                        out[g, j, :self.obs_dims[j]] = np.asarray(cut, np.float32).reshape(-1)
            else:
                out[:, j, :self.obs_dims[j]] = games.rows[seat].obs.reshape(rows, -1)
        return out

    def masks(self, games: JointEpisodes, final: bool = False) -> np.ndarray:
        """``[T, n, max_actions]`` legal actions (``final``: at each game's cut; none where
        the seat was not in play); padded actions are illegal, and a row where the seat did
        not act allows none."""
        rows = len(games) if final else games.steps
        out = np.zeros((rows, self.n, self.max_actions), bool)
        for j, seat in enumerate(self.seats):
            width, seat_rows = self.action_widths[j], games.rows[seat]
            if final:
                for g, (cut, mask) in enumerate(zip(seat_rows.final_obs, seat_rows.final_masks)):
                    if cut is not None:
                        out[g, j, :width] = True if mask is None else np.asarray(mask, bool)
            elif seat_rows.masks is not None:
                out[:, j, :width] = seat_rows.masks
            else:
                out[:, j, :width] = seat_rows.acted[:, None]
        return out

    def actions(self, games: JointEpisodes) -> np.ndarray:
        """``[T, n]`` discrete actions, or ``[T, n, *action_shape]`` Box actions as chosen."""
        return np.stack([games.rows[s].actions for s in self.seats], axis=1)

    def state(self, games: JointEpisodes, final: bool = False) -> np.ndarray:
        """``[T, state_dim]`` centralized input (``final``: ``[G, state_dim]`` at each game's
        end or cut): the env's state, else every seat's observation concatenated."""
        if self.has_state:
            source = games.final_state if final else games.state
            assert source is not None
            return np.asarray(source, np.float32).reshape(len(source), -1)
        rows = len(games) if final else games.steps
        parts = []
        for seat in games.seats:
            seat_rows = games.rows[seat]
            width = int(np.prod(seat_rows.obs.shape[1:], dtype=int))
            if final:
                part = np.zeros((rows, width), np.float32)
                for g, cut in enumerate(seat_rows.final_obs):
                    if cut is not None:
                        part[g] = np.asarray(cut, np.float32).reshape(-1)
            else:
                part = seat_rows.obs.reshape(rows, -1).astype(np.float32)
            parts.append(part)
        return np.concatenate(parts, axis=1)

    def team_rewards(self, games: JointEpisodes) -> np.ndarray:
        """``[T]``: the rewards of the learner's own seats at each step, summed."""
        game = games.game_of_row
        return np.sum([games.rows[s].rewards * games.own[game, k] for s, k in zip(self.seats, self.columns(games))],
                      axis=0)


class TeamNet(nn.Module):
    """Every team seat's output from its population's network (the policies' own modules,
    so training them trains the policies): ``[B, n, max_obs]`` in, ``[B, n, width]`` out,
    zero-padded. A population of several seats reads each seat's one-hot id too where its
    policy does."""

    def __init__(self, team: Team, nets: Mapping[str, nn.Module], width: int) -> None:
        super().__init__()
        self.team = team
        self.nets = nn.ModuleDict(dict(nets))
        self.width = width
        self._index = {p: torch.as_tensor(seats) for p, (seats, _) in team.groups.items()}
        self._ids = {p: _ids(ids, team.policies[p].n_ids) for p, (_, ids) in team.groups.items()}
        self._dims = {p: team.obs_dims[seats[0]] for p, (seats, _) in team.groups.items()}

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = obs.new_zeros(*obs.shape[:-1], self.width)
        for population, net in self.nets.items():
            index = self._index[population]
            x = obs[..., index, :self._dims[population]]
            ids = self._ids[population]
            if ids is not None:
                x = torch.cat([x, ids.expand(*x.shape[:-1], ids.shape[-1])], dim=-1)
            y = net(x)
            out[..., index, :y.shape[-1]] = y
        return out


def _ids(ids: Sequence[int], n_ids: int) -> torch.Tensor | None:
    """``[m, n_ids]`` one-hot rows of the seats ``ids`` (None: the network reads no id)."""
    if n_ids <= 1:
        return None
    return torch.nn.functional.one_hot(torch.as_tensor(list(ids)), n_ids).float()


def space_error(spaces: Sequence[Discrete | Box]) -> str | None:
    """Why one team cannot hold seats of these action spaces (None: it can): discrete
    and Box actions together, or Box actions of different shapes."""
    kinds = {isinstance(s, Discrete) for s in spaces}
    if len(kinds) > 1:
        return "its seats mix discrete and Box actions"
    shapes = {s.shape for s in spaces if isinstance(s, Box)}
    if len(shapes) > 1:
        return f"its seats' Box actions differ in shape ({', '.join(str(s) for s in sorted(shapes))})"
    return None
