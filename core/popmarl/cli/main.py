"""The ``popmarl`` command line: the parser, each verb's handler, and how errors end it.

User errors print one line to stderr and exit 2, with no traceback. A verb's libraries
(the runner, the tools) are imported in its handler, so that the command line starts
without them; ``plugins`` and ``show`` have modules of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import popmarl
from popmarl.cli.plugins import plugins_command
from popmarl.cli.show import add_show_arguments, show_command
from popmarl.errors import ConfigError, PluginError, PopmarlError, ResumeError, Terminated, UserError
from popmarl.plugins.hooks import make_plugin_manager
from popmarl.plugins.registry import plugin_distributions

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """``--version``: popmarl's version, then each installed plugin distribution's."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print popmarl's version and the installed plugins' versions")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        lines = [f"popmarl {popmarl.__version__}"]
        lines += [f"{name} {version}" for name, version in plugin_distributions().items()]
        print("\n".join(lines))
        parser.exit(0)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="popmarl", description="Population-based multi-agent reinforcement learning.")
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="run (or resume) a config")
    run.add_argument("config", nargs="?", help="the YAML run config (with --resume: optional; the run's own by default)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key (dotted path, YAML value; null unsets it, so its default "
                          "applies, e.g. --set solver=null); repeatable")
    run.add_argument("--out", help="the run directory to create (default: runs/<scenario>-<env>-<time>)")
    run.add_argument("--resume", metavar="DIR",
                     help="continue the run in DIR from its last checkpoint, as it was configured "
                          "(change stopping or trackers with --set, e.g. --set stopping.max_iterations=50)")
    plugins = commands.add_parser("plugins", help="list every installed component")
    plugins.add_argument("--check", action="store_true", help="import each component; exit 1 if any fails")
    show = commands.add_parser("show", help="print a run's status, summary, payoff table and meta-strategies "
                                            "(of a run going or killed: its last checkpoint's)")
    add_show_arguments(show)
    evaluate = commands.add_parser("eval", help="play a run's final meta-strategies against an opponent")
    evaluate.add_argument("dir", help="a run directory")
    evaluate.add_argument("--opponent", default="random", help="'random' (default) or another run's directory")
    evaluate.add_argument("--episodes", type=_positive, default=1000, help="episodes per seat (default 1000)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--backend", metavar="NAME",
                          help="the backend that plays the games, e.g. local or ray (default: the run's own, "
                               "as configured)")
    evaluate.add_argument("--main", action="store_true",
                          help="a league run: play its main agents instead of its Nash mixture")
    evaluate.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    rank = commands.add_parser("rank", help="cross-play the policies of runs of one two-player env and rate them "
                                            "(Elo, alpha-rank, Nash averaging)")
    rank.add_argument("dirs", nargs="+", metavar="RUN_DIR", help="run directories of the same env")
    rank.add_argument("--all", dest="every", action="store_true",
                      help="every policy of each run (default: those with positive final meta-strategy weight)")
    rank.add_argument("--episodes", type=_positive, default=None, metavar="N",
                      help="episodes per pairing and seat order where not exact (default 200)")
    rank.add_argument("--max-pairs", type=_positive, default=None, metavar="N",
                      help="refuse tournaments of more pairings (default 2000)")
    rank.add_argument("--seed", type=int, default=0)
    rank.add_argument("--backend", metavar="NAME", help="the backend that plays the games (default: the first run's)")
    rank.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    rank.set_defaults(handler=_cmd_rank)
    exploit = commands.add_parser("exploit", help="approximate NashConv of a run: train RL best responses to its "
                                                  "meta-strategy")
    exploit.add_argument("dir", help="a run directory")
    exploit.add_argument("--algorithm", metavar="NAME",
                         help="the learning algorithm of the responses (default: the run's own if it learns, else dqn, "
                              "or ppo for Box actions)")
    exploit.add_argument("--env-steps", type=_positive, default=None, metavar="N",
                         help="env steps of each response's training (default 500000)")
    exploit.add_argument("--seeds", type=_positive, default=1, metavar="K",
                         help="responses per seat; the best seed's lower bound is reported (default 1)")
    exploit.add_argument("--max-wall-time", type=_positive_float, default=None, metavar="S",
                         help="seconds for the whole command (training stops early)")
    exploit.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    play = commands.add_parser("play", help="play a game against a run's meta-strategies in the terminal")
    play.add_argument("dir", help="a run directory")
    play.add_argument("--seat", metavar="NAME", help="the seat you play (default: the first)")
    play.add_argument("--seed", type=int, default=None, metavar="N",
                      help="seeds chance and the opponents' draws (default: a new one each game, shown)")
    play.add_argument("--iteration", type=int, default=None, metavar="K",
                      help="play the meta-strategies of iteration K (default: the final ones)")
    play.set_defaults(handler=_cmd_play)
    bench = commands.add_parser("bench", help="measure throughput").add_subparsers(
        dest="bench", required=True, parser_class=_Parser)
    rollout = bench.add_parser("rollout", help="evaluate-mode env steps/s with fresh policies")
    rollout.add_argument("--env", required=True, help="env name (e.g. openspiel, pettingzoo, matrix)")
    rollout.add_argument("--env-param", action="append", default=[], metavar="K=V", help="env parameter; repeatable")
    rollout.add_argument("--algorithm", default="dqn", help="whose fresh policies play (default dqn)")
    rollout.add_argument("--algorithm-param", action="append", default=[], metavar="K=V")
    rollout.add_argument("--hidden", default="128,128", help="MLP hidden sizes (default 128,128)")
    rollout.add_argument("--num-envs", type=_positive, default=64)
    rollout.add_argument("--steps", type=_positive, default=100_000)
    rollout.add_argument("--json", action="store_true", help="end with one JSON object on the last line")
    rollout.set_defaults(handler=_cmd_bench_rollout)
    for name, handler in (("run", _cmd_run), ("plugins", plugins_command), ("show", show_command),
                          ("eval", _cmd_eval), ("exploit", _cmd_exploit)):
        commands.choices[name].set_defaults(handler=handler)
    make_plugin_manager().hook.popmarl_add_commands(commands=commands)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from popmarl.config.loading import load_config
    from popmarl.runs.runner import run

    if args.out and args.resume:
        raise UserError("--out and --resume are exclusive: --resume continues the run in its own directory")
    if args.resume is not None:
        config = _resume_config(args.resume, args.config, args.overrides)
    elif args.config is None:
        raise UserError("run: a CONFIG is required (or --resume DIR to continue a run)")
    else:
        config = load_config(args.config, args.overrides)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        summary = run(config, out=args.out, resume=args.resume, console_warnings=False)
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() may be called again in this process
    return 0 if summary.get("status") in ("completed", "stopped") else 1


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM stops a run as Ctrl-C does: its summary is written and its trackers end their
    runs (MLflow: KILLED). A second SIGTERM kills at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated("SIGTERM")


def _resume_config(resume: str, config: str | None, overrides: list[str]) -> Any:
    """The run's saved config with ``overrides``; a ``config`` given too, with the same
    overrides, must equal it except in the keys ``--set`` names (so the command that made
    the run, repeated with ``--resume``, continues it; a changed stopping condition is made
    explicit with ``--set``, never read from a file)."""
    from popmarl.config.loading import differences
    from popmarl.config.schema import to_dict
    from popmarl.runs.rundir import RunDirectory

    run = RunDirectory(resume)
    saved = run.read_config()
    if config is not None:
        named = [item.partition("=")[0].strip() for item in overrides]
        different = [key for key in differences(saved, to_dict(_load_resumed(run, config, overrides)))
                     if not any(key == n or key.startswith(f"{n}.") for n in named)]
        if different:
            raise ResumeError(
                f"--resume {run.path}: {config} differs from the run's config in: {', '.join(different)}; "
                f"continue the run as configured with 'popmarl run --resume {run.path}' and change "
                f"stopping or trackers explicitly with --set (e.g. --set stopping.max_iterations=N)")
    return _load_resumed(run, run.config_file, overrides)


def _load_resumed(run: Any, path: str | os.PathLike[str], overrides: list[str]) -> Any:
    """``load_config(path, overrides)`` for ``--resume``. Where that fails and ``overrides``
    change more than stopping and trackers, that is the error (e.g. ``--set solver.name=X``
    carries the old solver's params, which X may refuse, but the run could not take X anyway)."""
    from popmarl.config.loading import apply_overrides, load_config

    try:
        return load_config(path, overrides)
    except ConfigError:
        type(run).check_resume(run.path, apply_overrides(run.read_config(), overrides))
        raise


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _cmd_eval(args: argparse.Namespace) -> int:
    from popmarl.config.schema import ComponentConfig
    from popmarl.tools.evaluate import evaluate_run, format_report, load_run, opponent_pools

    run = load_run(args.dir, main=args.main)
    backend = None
    if args.backend is not None and args.backend != run.config.backend.name:
        backend = ComponentConfig(name=args.backend)
    report = evaluate_run(run, opponent_pools(run, args.opponent), episodes=args.episodes, seed=args.seed,
                          backend=backend)
    exact = all(r["exact"] for r in report.values())
    if not run.status.finished:  # its last committed checkpoint played
        print(f"{args.dir}: {run.status.describe()}")
    print(f"{args.dir} vs {args.opponent}, " + ("exact" if exact else f"{args.episodes} episodes per seat"))
    print(format_report(report))
    if args.json:
        print(json.dumps({"run": str(args.dir), "opponent": args.opponent, "iteration": run.iteration,
                          "status": run.status.to_json(), "populations": report}))
    return 0


def _cmd_rank(args: argparse.Namespace) -> int:
    from popmarl.config.schema import ComponentConfig
    from popmarl.tools.tournament import DEFAULT_EPISODES, DEFAULT_MAX_PAIRS, format_ratings, ratings, tournament

    backend = ComponentConfig(name=args.backend) if args.backend is not None else None
    played = tournament(args.dirs, every=args.every, episodes=args.episodes or DEFAULT_EPISODES,
                        max_pairs=args.max_pairs or DEFAULT_MAX_PAIRS, seed=args.seed, backend=backend)
    report = ratings(played)
    for path, status in zip(played.runs, played.statuses):
        if not status.finished:  # its last committed checkpoint's policies played
            print(f"{path}: {status.describe()}")
    how = "exact" if report["exact"] else f"{report['episodes']} episodes per pairing and seat order"
    mode = ("one pool, every pair in both seat orders" if played.shared else
            f"per seat: {played.agents[0]}'s policies against {played.agents[1]}'s (Elo from the bipartite table, "
            f"Nash averaging agent-vs-task with {played.agents[0]} the agents)")
    print(f"{len(played.rows) if played.shared else len(played.rows) + len(played.columns)} policies, "
          f"{report['pairs']} pairings ({report['played']} played now, the rest cached), {how}; {mode}")
    print(format_ratings(report))
    if report["note"]:
        print(f"note: {report['note']}")
    if args.json:
        print(json.dumps(report))
    return 0


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _cmd_exploit(args: argparse.Namespace) -> int:
    from popmarl.tools.exploit import DEFAULT_ENV_STEPS, EXPLOIT_FILE, exploit_run
    from popmarl.tools.exploit_report import format_report

    report, result = exploit_run(args.dir, algorithm=args.algorithm, env_steps=args.env_steps or DEFAULT_ENV_STEPS,
                         seeds=args.seeds, max_wall_time_s=args.max_wall_time,
                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_report(report))
    print(f"written to {os.path.join(args.dir, EXPLOIT_FILE)}")
    if args.json:
        print(json.dumps(result))
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    from popmarl.tools.loaded_run import load_run
    from popmarl.tools.play import play

    run = load_run(args.dir, args.iteration)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    try:
        play(run, args.seat, seed=seed, stdin=sys.stdin, stdout=sys.stdout)
    except KeyboardInterrupt:
        print("\npopmarl: interrupted: game abandoned", file=sys.stderr)
        return 130
    return 0


def _cmd_bench_rollout(args: argparse.Namespace) -> int:
    from popmarl.tools.bench import bench_rollout, parse_params

    algorithm_params = parse_params(args.algorithm_param, "--algorithm-param")
    if args.algorithm != "random":
        try:
            algorithm_params.setdefault("hidden", [int(h) for h in args.hidden.split(",") if h.strip()])
        except ValueError:
            raise UserError(f"--hidden: expected sizes like 128,128, got {args.hidden!r}") from None
    result = bench_rollout(env_name=args.env, env_params=parse_params(args.env_param, "--env-param"),
                           algorithm_name=args.algorithm, algorithm_params=algorithm_params,
                           num_envs=args.num_envs, steps=args.steps)
    print(f"env {result.env} ({result.num_envs} games), {result.algorithm} policies: {result.env_steps} steps, "
          f"{result.episodes} episodes in {result.seconds:.2f}s = {result.steps_per_s:,.0f} steps/s")
    if args.json:
        print(json.dumps({"env": result.env, "algorithm": result.algorithm, "num_envs": result.num_envs,
                          "env_steps": result.env_steps, "episodes": result.episodes,
                          "seconds": result.seconds, "steps_per_s": result.steps_per_s}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``popmarl`` command."""
    try:
        args = _parser().parse_args(argv)
        return int(args.handler(args))
    except (UserError, PluginError) as exc:
        print(f"popmarl: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PopmarlError as exc:  # a failure popmarl diagnosed (e.g. a backend's workers)
        print(f"popmarl: error: {exc}", file=sys.stderr)
        return 1
    except Terminated:
        print("popmarl: terminated (SIGTERM); continue with --resume", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("popmarl: interrupted; continue with --resume", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `popmarl show DIR | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
