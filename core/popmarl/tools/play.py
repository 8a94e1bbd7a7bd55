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

import re
from collections.abc import Callable
from typing import TextIO

import numpy as np

from popmarl.interfaces.match import Action
from popmarl.interfaces.spaces import Box
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
    space = run.env.action_space(seat)
    say = _printer(stdout)
    said = "" if run.status.finished else f" ({run.status.describe()})"
    how = f"Type {describe_box(space)}" if isinstance(space, Box) else "Type a move's number or name"
    say(f"{run.path}, iteration {run.iteration}{said}: you play {seat} against "
        f"{', '.join(actors) or 'nobody'} (each playing its meta-strategy; seed {seed}). {how}, or quit.")
    try:
        while movers := match.to_move():
            actions: dict[str, Action] = {}
            if seat in movers:
                say("")
                say(match.view())
                move = _read_box(space, stdin, say) if isinstance(space, Box) else _read_move(match, stdin, say)
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

    def parse(text: str) -> int:
        if text.lstrip("-").isdigit() and int(text) in moves:
            return int(text)
        if text.lower() in by_name:
            return by_name[text.lower()]
        raise ValueError(f"{text!r} is not a legal move here; type a number or name from the moves listed, or quit")

    move = _ask(stdin, say, parse)
    return None if move is None else int(move)


def _read_box(space: Box, stdin: TextIO, say: Say) -> np.ndarray | None:
    """The person's Box action (None: quit, or the input ended), asked until it parses."""
    say(f"action: {describe_box(space)}")
    action = _ask(stdin, say, lambda text: parse_box_action(text, space))
    return None if action is None else np.asarray(action)


def _ask(stdin: TextIO, say: Say, parse: Callable[[str], Action]) -> Action | None:
    """Prompt and read lines until ``parse`` takes one (its ValueError is said, and asked
    again); None for ``quit`` or the end of the input. A blank line asks again."""
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
        if not text:
            continue
        try:
            return parse(text)
        except ValueError as problem:
            say(str(problem))


def _bounds(low: float, high: float) -> str:
    return f"[{low:g}, {high:g}]"


def describe_box(space: Box) -> str:
    """How to type an action of ``space``: how many numbers, in which order, within
    which bounds."""
    n = space.size
    numbers = "1 number" if n == 1 else f"{n} numbers separated by spaces or commas"
    if len(space.shape) > 1:
        numbers += f" (the Box's shape {space.shape}, row by row)"
    low, high = space.low.reshape(-1), space.high.reshape(-1)
    if n and (low == low[0]).all() and (high == high[0]).all():
        within = f"{'' if n == 1 else 'each '}in {_bounds(low[0], high[0])}"
    else:
        within = "within " + ", ".join(_bounds(lo, hi) for lo, hi in zip(low, high))
    return f"{numbers}, {within}"


#: What separates the numbers of a typed Box action: spaces, commas, and the brackets
#: numpy prints around an array (and around each row of one).
_SEPARATORS = re.compile(r"[\s,\[\]()]+")


def parse_box_action(text: str, space: Box) -> np.ndarray:
    """``text``, numbers separated by spaces or commas (one per entry of the Box, row by
    row; brackets as numpy prints an array are allowed), as an action of ``space`` (its
    shape and dtype); a ValueError of one line for anything else: a word that is no
    number, too many or too few numbers, a number that is not finite or outside its bound."""
    words = [w for w in _SEPARATORS.split(text) if w]
    retry = f"type {describe_box(space)}, or quit"
    try:
        values = np.array([float(w) for w in words], dtype=np.float64)
    except ValueError:
        bad = next(w for w in words if not _is_number(w))
        raise ValueError(f"{bad!r} is not a number; {retry}") from None
    if values.size != space.size:
        raise ValueError(f"{text!r}: {values.size} number{'' if values.size == 1 else 's'}, the action needs "
                         f"{space.size}; {retry}")
    low, high = space.low.reshape(-1), space.high.reshape(-1)
    for k, value in enumerate(values):
        where = "" if space.size == 1 else f"entry {k + 1}: "
        if not np.isfinite(value):
            raise ValueError(f"{where}{words[k]} is not a finite number; {retry}")
        if not low[k] <= value <= high[k]:
            raise ValueError(f"{where}{value:g} is outside {_bounds(low[k], high[k])}; {retry}")
    return space.clip(values.reshape(space.shape))  # in the Box's dtype, its rounding kept within the bounds


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
