"""A loaded PettingZoo run acting on PettingZoo's own observations (``popmarl.load_run``,
actors) and ``popmarl play`` on tic-tac-toe: piped, and at a real terminal (tmux)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import popmarl
import pytest

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

TICTACTOE = {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.tictactoe_v3"}}
CONFIG = {"scenario": "psro", "seed": 0, "env": TICTACTOE, "algorithm": {"name": "random"},
          "solver": {"name": "uniform"}, "stopping": {"max_iterations": 1},
          "evaluation": {"episodes_per_entry": 8}, "trackers": []}
SQUARES = [f"{column}{row}" for column in "abc" for row in "123"]  # action 3 * column + row


def _tictactoe() -> Any:
    """PettingZoo's own tic-tac-toe (imported here: its module warns of PettingZoo's old API)."""
    from pettingzoo.classic import tictactoe_v3

    return tictactoe_v3.env()


@pytest.fixture(scope="module")
def tictactoe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tictactoe") / "run"
    popmarl.run(popmarl.validate(CONFIG), out=str(out))
    return out


def test_observe_gives_the_batch_the_env_vector_gives(tictactoe: Path) -> None:
    """PettingZoo's tic-tac-toe and the env's own vector, stepped with the same actor
    moves: ``observe`` of PettingZoo's observation is the vector's row, whether given as
    the dict or as its array and mask."""
    run = popmarl.load_run(tictactoe)
    actors = {seat: run.actor(seat, rng=np.random.default_rng(k)) for k, seat in enumerate(run.env.agents)}
    vector = run.env.vector(num_envs=1, seed=0)
    step = vector.reset()
    game = _tictactoe()
    game.reset(seed=0)
    moves = 0
    while not step.finished.size:
        (agent, (_, expected)), = step.decisions.items()
        assert agent == game.agent_selection
        native = game.observe(agent)
        for seen in (run.env.observe(agent, native),
                     run.env.observe(agent, native["observation"], native["action_mask"])):
            np.testing.assert_array_equal(seen.obs, expected.obs)
            np.testing.assert_array_equal(seen.mask, expected.mask)
        action = actors[agent].act(native)
        assert native["action_mask"][action] == 1
        game.step(action)
        step = vector.step({agent: np.array([action])})
        moves += 1
    assert moves >= 5
    assert step.returns[0].tolist() == [game.rewards[a] for a in run.env.agents]


def test_actors_play_whole_games_in_pettingzoos_own_loop(tictactoe: Path) -> None:
    run = popmarl.load_run(tictactoe)
    rng = np.random.default_rng(3)
    actors = {seat: run.actor(seat, rng=rng) for seat in run.env.agents}
    game = _tictactoe()
    for episode in range(20):
        game.reset(seed=episode)
        for actor in actors.values():
            actor.reset()
        totals = dict.fromkeys(run.env.agents, 0.0)
        for agent in game.agent_iter():
            observation, reward, terminated, truncated, _ = game.last()
            totals[agent] += reward
            # Illegal moves would end the game with -1 for the mover (PettingZoo's guard).
            game.step(None if terminated or truncated else actors[agent].act(observation))
        assert sorted(totals.values()) in ([-1, 1], [0, 0])


def _play(cli: Any, run: Path, *args: str, moves: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli.command(["play", run, *args]), input=moves, capture_output=True, text=True,
                          cwd=run.parent, env=cli.env(), timeout=900)


def _last_board(text: str) -> list[str]:
    """The rows of the last board drawn in ``text`` (its three cells each)."""
    rows = re.findall(r"^ [123]  (.) \| (.) \| (.)$", text, re.MULTILINE)
    return ["".join(row) for row in rows[-3:]]


@pytest.mark.parametrize(("seat", "mark"), [("player_1", "X"), ("player_2", "O")])
@pytest.mark.parametrize("seed", range(3))
def test_play_tictactoe_piped(cli, tictactoe: Path, seat: str, mark: str, seed: int) -> None:
    # Every square in turn: a taken one gets a line and a new prompt, the next is tried.
    played = _play(cli, tictactoe, "--seat", seat, "--seed", str(seed), moves="\n".join(SQUARES) + "\n")
    assert played.returncode == 0, played.stderr
    out = played.stdout
    assert "    a   b   c" in out
    assert re.search(r"^moves: (\d [abc][123])(, \d [abc][123])*$", out, re.MULTILINE)
    assert "moves: 0 a1, 1 a2, 2 a3, 3 b1, 4 b2, 5 b3, 6 c1, 7 c2, 8 c3" in out or seat == "player_2"
    opponent = "player_2" if seat == "player_1" else "player_1"
    assert re.search(rf"^{opponent} plays [abc][123]$", out, re.MULTILINE)
    head, end = out.split("game over:\n")
    board = "".join(_last_board(end))
    mine, theirs = board.count(mark), board.count("O" if mark == "X" else "X")
    assert mine + theirs >= 5 and abs(mine - theirs) <= 1
    result = out.splitlines()[-1]
    assert re.fullmatch(r"returns: player_1 -?\d, player_2 -?\d; (you won|you lost|a draw)", result), result
    for line in re.findall(r"^'(..)' is not a legal move here.*$", head, re.MULTILINE):
        assert line in SQUARES  # only squares already taken are refused


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    """``tmux -L <socket>``: a tmux server of this test's own, killed afterwards."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    command = ["tmux", "-L", f"popmarl-play-{uuid.uuid4().hex[:8]}"]
    yield command
    subprocess.run([*command, "kill-server"], capture_output=True, timeout=600)


def _screen(tmux: list[str], until: str, timeout: float = 600) -> str:
    """The pane's text once it shows ``until`` (a hang guard: fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        text = subprocess.run([*tmux, "capture-pane", "-p", "-t", "play", "-S", "-200"], capture_output=True,
                              text=True, timeout=600).stdout
        if until in text:
            return text
        assert time.monotonic() < deadline, f"the terminal never showed {until!r}:\n{text}"
        time.sleep(0.2)


def test_play_tictactoe_at_a_terminal(cli, tictactoe: Path, tmux: list[str]) -> None:
    command = shlex.join(map(str, cli.command(["play", tictactoe, "--seat", "player_1", "--seed", "1"])))
    subprocess.run([*tmux, "new-session", "-d", "-s", "play", "-x", "120", "-y", "50",
                    f"{command}; echo EXIT=$?; sleep 600"], check=True, timeout=600, env=cli.env())
    first = _screen(tmux, "your move:")
    assert "moves: 0 a1, 1 a2, 2 a3, 3 b1, 4 b2, 5 b3, 6 c1, 7 c2, 8 c3" in first
    subprocess.run([*tmux, "send-keys", "-t", "play", "b2", "Enter"], check=True, timeout=600)
    second = _screen(tmux, "player_2 plays ")
    assert " 2  . | X | ." in second  # the person's move, on the board the terminal shows
    assert "your move: b2" in second  # typed once (the terminal's echo), not echoed again
    assert second.count("b2") == 2  # the moves line and the typed move
    subprocess.run([*tmux, "send-keys", "-t", "play", "quit", "Enter"], check=True, timeout=600)
    assert "game abandoned\nEXIT=0" in _screen(tmux, "EXIT=")
