"""Hooks (popmarl.interfaces.hookspec, popmarl.plugins.hooks) and the builtin trackers that implement them."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pluggy
import pytest

import popmarl
from popmarl.interfaces import hookspec
from popmarl.builtin.console_tracker import ConsoleTracker
from popmarl.builtin.jsonl_tracker import JsonlTracker
from popmarl.errors import PluginError
from popmarl.plugins.hooks import PLUGIN_GROUP, Hooks, make_plugin_manager
from popmarl.data.run import RunInfo
from popmarl.plugins.registry import STRICT_ENV, PluginWarning
from popmarl.interfaces.tracker import Tracker

from testkit.run_files import read_metrics, read_summary, tree_digest

HOOKS = sorted(
    name for name, obj in vars(hookspec).items()
    if inspect.isfunction(obj) and getattr(obj, f"{hookspec.PROJECT}_spec", None) is not None
)
#: The lifecycle hooks of a run (they get the run's RunInfo); the others belong to the CLI.
RUN_HOOKS = sorted(name for name in HOOKS if "run" in inspect.signature(getattr(hookspec, name)).parameters)

#: A hook plugin module that records every call (in memory, and to $HOOK_LOG if set).
RECORDER = """
import json, os, pickle
from popmarl import hookimpl

CALLS = []

def _record(hook, **kwargs):
    pickle.dumps(kwargs)  # hook arguments must be plain, picklable records
    CALLS.append((hook, kwargs))
    path = os.environ.get("HOOK_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"hook": hook, "iteration": kwargs.get("iteration")}) + "\\n")

@hookimpl
def popmarl_run_start(run):
    _record("popmarl_run_start", run=run)

@hookimpl
def popmarl_iteration_end(run, iteration, metrics):
    _record("popmarl_iteration_end", run=run, iteration=iteration, metrics=metrics)

@hookimpl
def popmarl_policy_added(run, population, policy_id):
    _record("popmarl_policy_added", run=run, population=population, policy_id=policy_id)

@hookimpl
def popmarl_checkpoint(run, path):
    _record("popmarl_checkpoint", run=run, path=path)

@hookimpl
def popmarl_run_end(run, summary):
    _record("popmarl_run_end", run=run, summary=summary)

@hookimpl
def popmarl_add_commands(commands):
    _record("popmarl_add_commands")
    hello = commands.add_parser("hook-hello", help="say hello")
    hello.add_argument("who")
    hello.set_defaults(handler=_hello)

def _hello(args):
    from popmarl import UserError
    if args.who == "nobody":
        raise UserError("hook-hello: nobody to greet")
    print(f"hello {args.who}")
    return 0
"""


def test_the_hooks_of_the_design_exist() -> None:
    assert set(RUN_HOOKS) >= {"popmarl_run_start", "popmarl_iteration_end", "popmarl_policy_added",
                          "popmarl_checkpoint", "popmarl_run_end"}


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_is_documented(name: str) -> None:
    function = getattr(hookspec, name)
    doc = inspect.getdoc(function)
    assert doc and len(doc.splitlines()[0]) > 10, f"{name} has no docstring"
    for parameter in inspect.signature(function).parameters:
        assert f":param {parameter}:" in doc, f"{name} does not document {parameter}"


@pytest.mark.parametrize("name", RUN_HOOKS)
def test_every_run_hook_has_a_typed_forwarding_method(name: str) -> None:
    method = getattr(Hooks, name.removeprefix("popmarl_"), None)
    assert method is not None, f"popmarl.plugins.hooks.Hooks has no method for {name}"
    forwarded = list(inspect.signature(method).parameters)[1:]
    assert forwarded == list(inspect.signature(getattr(hookspec, name)).parameters)


def _info(tmp_path: Path) -> RunInfo:
    return RunInfo(run_dir=str(tmp_path), scenario="psro", seed=0, config={}, populations=("a", "b"))


def test_make_plugin_manager_registers_builtin_objects(tmp_path: Path) -> None:
    seen: list[tuple[str, object]] = []

    class Builtin:
        @popmarl.hookimpl
        def popmarl_policy_added(self, run: RunInfo, population: str, policy_id: str) -> None:
            seen.append((population, policy_id))

        @popmarl.hookimpl
        def popmarl_run_end(self, run: RunInfo, summary: dict) -> None:
            seen.append(("end", summary["status"]))

    plugin = Builtin()
    manager = make_plugin_manager([plugin], external=False)
    assert isinstance(manager, pluggy.PluginManager)
    assert manager.is_registered(plugin)
    hooks = Hooks(manager)
    hooks.policy_added(_info(tmp_path), "a", "a/0")
    hooks.run_end(_info(tmp_path), {"status": "completed"})
    hooks.run_start(_info(tmp_path))  # no implementation: nothing happens
    assert seen == [("a", "a/0"), ("end", "completed")]
    # No module-global manager: each call builds its own.
    other = make_plugin_manager([], external=False)
    assert other is not manager and not other.is_registered(plugin)


def test_an_implementation_of_an_unknown_hook_is_refused() -> None:
    class Misspelled:
        @popmarl.hookimpl
        def popmarl_iteration_ends(self, run: RunInfo) -> None: ...

    with pytest.raises(pluggy.PluginValidationError):
        make_plugin_manager([Misspelled()], external=False)


@pytest.fixture
def recorder(make_dist):
    """The RECORDER module installed as a ``popmarl.plugins`` entry point."""
    dist = make_dist("popmarl-hook-recorder", entry_points={PLUGIN_GROUP: {"hook_recorder": "hook_recorder_mod"}},
                     modules={"hook_recorder_mod": RECORDER})
    return dist


def _calls():
    return sys.modules["hook_recorder_mod"].CALLS


def test_every_hook_fires_in_a_run_and_reaches_an_entry_point_plugin(recorder, run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 3})
    calls = _calls()
    names = [hook for hook, _ in calls]
    assert set(names) == set(RUN_HOOKS), "every run hook is fired at least once"
    assert names[0] == "popmarl_run_start" and names[-1] == "popmarl_run_end"
    assert names.count("popmarl_run_start") == names.count("popmarl_run_end") == 1
    # Two populations: 2 initial policies + 2 per iteration; one checkpoint per commit.
    assert names.count("popmarl_policy_added") == 2 * 4
    assert names.count("popmarl_checkpoint") == 4
    run_dir = tmp_path / "run"
    for hook, kwargs in calls:
        info = kwargs["run"]
        assert isinstance(info, RunInfo)
        assert Path(info.run_dir) == run_dir and info.scenario == "psro" and not info.resumed
        assert info.populations == ("player_0", "player_1")
        if hook == "popmarl_checkpoint":
            assert Path(kwargs["path"]).is_dir()
    added = [kw["policy_id"] for hook, kw in calls if hook == "popmarl_policy_added"]
    assert added == [f"player_{p}/{i}" for i in range(4) for p in (0, 1)]
    assert all(kw["policy_id"].startswith(kw["population"] + "/") for h, kw in calls if h == "popmarl_policy_added")
    ends = [kw for hook, kw in calls if hook == "popmarl_iteration_end"]
    assert [kw["iteration"] for kw in ends] == [1, 2, 3]
    assert [dict(kw["metrics"]) for kw in ends] == read_metrics(run_dir)
    assert dict(calls[-1][1]["summary"]) == summary == read_summary(run_dir)


def test_iteration_end_comes_after_its_checkpoint(recorder, run_inprocess) -> None:
    run_inprocess(stopping={"max_iterations": 2})
    names = [hook for hook, _ in _calls()]
    per_iteration = ["popmarl_policy_added", "popmarl_policy_added", "popmarl_checkpoint", "popmarl_iteration_end"]
    assert names == ["popmarl_run_start", *per_iteration[:3], *per_iteration, *per_iteration, "popmarl_run_end"]


def test_resume_announces_itself_and_re_adds_no_policy(recorder, run_inprocess) -> None:
    run_inprocess(stopping={"max_iterations": 2})
    _calls().clear()
    run_inprocess(resume="run", stopping={"max_iterations": 3})
    calls = _calls()
    start = calls[0][1]["run"]
    assert calls[0][0] == "popmarl_run_start" and start.resumed and start.start_iteration == 2
    added = [kw["policy_id"] for hook, kw in calls if hook == "popmarl_policy_added"]
    assert added == ["player_0/3", "player_1/3"]
    assert [kw["iteration"] for hook, kw in calls if hook == "popmarl_iteration_end"] == [3]


def test_entry_point_hook_plugins_work_from_the_command_line(recorder, run_cli, write_config, tmp_path: Path) -> None:
    log = tmp_path / "hooks.jsonl"
    result = run_cli("run", write_config(stopping={"max_iterations": 2}), "--out", tmp_path / "out",
                     env={"HOOK_LOG": str(log)}, pythonpath=[recorder.site])
    assert result.returncode == 0, result
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["hook"] for line in lines} == set(HOOKS), "every hook, the CLI's included"
    assert [line["hook"] for line in lines].count("popmarl_add_commands") == 1
    assert [line["iteration"] for line in lines if line["hook"] == "popmarl_iteration_end"] == [1, 2]


def test_a_plugin_adds_a_subcommand(recorder, run_cli) -> None:
    result = run_cli("hook-hello", "world", pythonpath=[recorder.site])
    assert (result.returncode, result.stdout) == (0, "hello world\n"), result
    listed = run_cli("--help", pythonpath=[recorder.site])
    assert "hook-hello" in listed.stdout
    refused = run_cli("hook-hello", "nobody", pythonpath=[recorder.site])
    assert refused.returncode == 2 and refused.stderr == "popmarl: error: hook-hello: nobody to greet\n", refused
    assert "hook-hello" not in run_cli("--help").stdout  # only where the plugin is installed


@pytest.fixture
def broken_hook_plugin(make_dist):
    return make_dist("popmarl-broken-hooks", version="2.0",
                     entry_points={PLUGIN_GROUP: {"broken_hooks": "broken_hooks_mod"}},
                     modules={"broken_hooks_mod": "raise RuntimeError('hook plugin exploded')\n"})


def test_a_hook_plugin_that_fails_to_import_is_a_warning(broken_hook_plugin, monkeypatch) -> None:
    monkeypatch.delenv(STRICT_ENV, raising=False)
    with pytest.warns(PluginWarning, match=r"popmarl-broken-hooks.*RuntimeError: hook plugin exploded"):
        manager = make_plugin_manager()
    assert manager.get_plugin("broken_hooks") is None


def test_a_hook_plugin_that_fails_to_import_is_an_error_in_strict_mode(broken_hook_plugin, monkeypatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(PluginError, match=r"popmarl-broken-hooks.*hook plugin exploded"):
        make_plugin_manager()


def test_a_broken_hook_plugin_in_strict_mode_stops_the_cli_before_anything_is_written(
        broken_hook_plugin, run_cli, write_config, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("run", write_config(), "--out", out, env={STRICT_ENV: "1"}, pythonpath=[broken_hook_plugin.site])
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "popmarl-broken-hooks" in result.stderr and "hook plugin exploded" in result.stderr
    assert tree_digest(out) == {} and not out.exists()


def test_a_broken_hook_plugin_in_strict_mode_stops_popmarl_run_before_anything_is_written(
        broken_hook_plugin, run_inprocess, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(PluginError, match="popmarl-broken-hooks"):
        run_inprocess(out="out")
    assert not (tmp_path / "out").exists()


# -- trackers -------------------------------------------------------------------------

@pytest.mark.parametrize("tracker", [ConsoleTracker, JsonlTracker])
def test_builtin_trackers_are_hook_implementations(tracker: type) -> None:
    instance = tracker()
    assert isinstance(instance, Tracker)
    manager = make_plugin_manager([instance], external=False)
    implemented = {caller.name for caller in manager.get_hookcallers(instance)}
    assert {"popmarl_run_start", "popmarl_iteration_end", "popmarl_run_end"} <= implemented
    assert implemented <= set(HOOKS)


def test_jsonl_tracker_writes_every_event_in_order(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 2}, trackers=["jsonl"])
    lines = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    per_iteration = ["policy_added", "policy_added", "checkpoint", "iteration_end"]
    assert [line["event"] for line in lines] == ["run_start", *per_iteration[:3], *per_iteration, *per_iteration,
                                                   "run_end"]
    times = [line["time"] for line in lines]
    assert times == sorted(times)
    assert [line["iteration"] for line in lines if line["event"] == "iteration_end"] == [1, 2]
    # An iteration's event names its line of metrics.jsonl, which it does not copy.
    assert [m["iteration"] for m in read_metrics(tmp_path / "run")] == [1, 2]
    assert all("metrics" not in line for line in lines)
    assert lines[-1]["status"] == summary["status"] == "completed" and lines[-1]["iterations"] == 2
    assert [line["policy_id"] for line in lines if line["event"] == "policy_added"][-2:] == ["player_0/2", "player_1/2"]


def test_jsonl_tracker_path_parameter(run_inprocess, tmp_path: Path) -> None:
    run_inprocess(stopping={"max_iterations": 1}, trackers=[{"name": "jsonl", "params": {"path": "log/ev.jsonl"}}])
    assert not (tmp_path / "run" / "events.jsonl").exists()
    # A relative path is inside the run directory (its folder must exist or be created).
    assert (tmp_path / "run" / "log" / "ev.jsonl").is_file()


def test_console_tracker_prints_progress_off_a_terminal(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(stopping={"max_iterations": 3}, trackers=["console"]),
                     "--out", tmp_path / "out")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith("popmarl: starting psro in")
    iterations = [line for line in lines if line.startswith("iteration ")]
    assert [line.split()[1] for line in iterations] == ["1/3", "2/3", "3/3"]
    assert all("nash_conv" in line for line in iterations)
    # The closing lines are not wrapped, however long the run directory's name.
    assert "completed after 3 iterations" in lines[-2] and lines[-2].endswith("/out/summary.json")
    assert lines[-1].startswith("popmarl: run directory ") and lines[-1].endswith(f"popmarl show {tmp_path / 'out'}")


def test_console_tracker_stderr_stream(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(trackers=[{"name": "console", "params": {"stream": "stderr"}}]),
                     "--out", tmp_path / "out")
    assert result.returncode == 0, result
    assert result.stdout == ""
    assert "completed after 3 iterations" in result.stderr


def test_console_rows_show_their_own_cumulative_elapsed_and_policies_per_population(capsys) -> None:
    """Each plain line shows its iteration's wall time (cumulative over a resumed run's
    sessions), not the time since the tracker started; policies per population by name;
    ``–`` for the rate of an iteration without env steps."""
    tracker = ConsoleTracker(live=False)
    info = RunInfo(run_dir="r", scenario="psro", seed=0, config={"stopping": {"max_iterations": 500}},
                   populations=("player_0", "player_1"), resumed=True, start_iteration=309)
    tracker.popmarl_run_start(run=info)
    rows = [{"iteration": 310, "nash_conv": 0.5, "population_size/player_0": 311, "population_size/player_1": 311,
             "iteration_env_steps": 0, "steps_per_s": 0.0, "wall_time_s": 1234.56},
            {"iteration": 311, "nash_conv": 0.25, "population_size/player_0": 312, "population_size/player_1": 312,
             "iteration_env_steps": 5000, "steps_per_s": 12345.6, "wall_time_s": 1300.0}]
    for row in rows:
        tracker.popmarl_iteration_end(run=info, iteration=row["iteration"], metrics=row)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iteration ")]
    assert lines == [
        "iteration 310/500  policies player_0 311, player_1 311  nash_conv 0.500000  env steps/s –  elapsed 1234.6s",
        "iteration 311/500  policies player_0 312, player_1 312  nash_conv 0.250000  env steps/s 12,346  "
        "elapsed 1300.0s",
    ]
