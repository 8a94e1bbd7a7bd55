"""``popmarl play``: a person plays one game against a run's meta-strategies.

The person takes one seat; every other seat is an :class:`~popmarl.tools.actor.Actor` of the
run (its policy drawn from its meta-strategy once, for this game). Before each of the
person's moves the game is shown as that seat sees it (:class:`~popmarl.interfaces.match.Match`)
with the legal moves by number and name; a move is typed as either. Moves are read line
by line, so they may be piped in; ``quit`` or the end of the input abandons the game,
and a line that is no legal move gets one line saying so and a new prompt. At the end
the whole game (hidden information included) and the result are shown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import numpy as np

from popmarl.interfaces.match import Action
from popmarl.errors import UserError
from popmarl.tools.loaded_run import LoadedRun
from popmarl.interfaces.match import Match, new_match
from popmarl.data.outcomes import outcome_signs
from popmarl.config.conversion import did_you_mean

QUIT = ("quit", "q", "exit")
_RESULT = {1: "you won", 0: "a draw", -1: "you lost"}


def play(run: LoadedRun, seat: str | None, *, seed: int, stdin: TextIO, stdout: TextIO) -> bool:
    """Play one game in ``seat`` (default: the first), reading moves from ``stdin``;
    return whether it was played to its end (False: abandoned)."""
    agents = run.env.agents
    seat = agents[0] if seat is None else seat
    if seat not in agents:
        raise UserError(f"--seat {seat}: not a seat of {run.path}{did_you_mean(seat, list(agents))}; "
                        f"its seats: {', '.join(agents)}")
    streams = np.random.SeedSequence(seed).spawn(len(agents))
    actors = {a: run.actor(a, rng=np.random.default_rng(stream)) for a, stream in zip(agents, streams) if a != seat}
    match = new_match(run.env, seat, seed=seed)
    say = _printer(stdout)
    said = "" if run.status.finished else f" ({run.status.describe()})"
    say(f"{run.path}, iteration {run.iteration}{said}: you play {seat} against "
        f"{', '.join(actors) or 'nobody'} (each playing its meta-strategy; seed {seed}). "
        "Type a move's number or name, or quit.")
    try:
        while movers := match.to_move():
            actions: dict[str, Action] = {}
            if seat in movers:
                say("")
                say(match.view())
                move = _read_move(match, stdin, say)
                if move is None:
                    return False
                actions[seat] = move
            for agent in movers:
                if agent != seat:
                    observation, mask = match.observation(agent)
                    actions[agent] = actors[agent].act(observation, mask)
            for line in match.apply(actions):
                say(line)
        returns = match.returns()
        sign = int(outcome_signs(np.array([returns[a] for a in agents]))[agents.index(seat)])
        say("")
        say("game over:")
        say(match.reveal())
        say("returns: " + ", ".join(f"{a} {r:g}" for a, r in returns.items()) + f"; {_RESULT[sign]}")
        return True
    finally:
        match.close()


Say = Callable[..., None]


def _printer(stdout: TextIO) -> Say:
    """``say(line, end="\\n")``: write a line and flush it (a prompt shows before input)."""
    def say(line: str, end: str = "\n") -> None:
        stdout.write(line + end)
        stdout.flush()

    return say


def _read_move(match: Match, stdin: TextIO, say: Say) -> int | None:
    """The person's move (None: quit, or the input ended), asked until it is legal."""
    moves = match.legal_moves()
    by_name = {name.lower(): action for action, name in moves.items()}
    say("moves: " + ", ".join(str(a) if name == str(a) else f"{a} {name}" for a, name in moves.items()))
    echo = not stdin.isatty()
    while True:
        say("your move: ", end="")
        line = stdin.readline()
        if not line:
            say("")
            say("end of input: game abandoned")
            return None
        text = line.strip()
        if echo:
            say(text)
        if text.lower() in QUIT:
            say("game abandoned")
            return None
        if text.lstrip("-").isdigit() and int(text) in moves:
            return int(text)
        if text.lower() in by_name:
            return by_name[text.lower()]
        if text:
            say(f"{text!r} is not a legal move here; type a number or name from the moves listed, or quit")
