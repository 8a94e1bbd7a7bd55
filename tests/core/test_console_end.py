"""The console's last line says where the run directory is and how to look at it."""

from __future__ import annotations

from pathlib import Path


def test_the_last_line_names_the_run_directory(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(trackers=["console"]), "--out", "runs/demo")
    assert result.returncode == 0, result
    last = result.stdout.strip().splitlines()[-1]
    assert last == f"popmarl: run directory {tmp_path.resolve() / 'runs' / 'demo'}; look at it with: popmarl show runs/demo"
    assert (tmp_path / "runs" / "demo" / "summary.json").is_file()
