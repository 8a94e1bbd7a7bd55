"""The README and the docs show PettingZoo configs by their full module paths (a classic game and
an MPE ``marl`` run) and links the plugin's README; tests/plugins/mlflow/
test_mlflow_readme_configs.py runs every config shown, these included."""

from __future__ import annotations

from readme_configs import README, readme_configs


def _modules(scenario: str) -> list[str]:
    return [c.config["env"]["params"]["module"] for c in readme_configs()
            if c.config["env"].get("name") == "pettingzoo" and c.config.get("scenario", "psro") == scenario]


def test_the_readme_shows_a_classic_and_an_mpe_config_and_links_the_plugin() -> None:
    assert any(m.startswith("pettingzoo.classic.") for m in _modules("psro"))
    assert any(m.startswith("mpe2.") for m in _modules("marl"))
    assert "(plugins/popmarl-pettingzoo/README.md" in README.read_text(encoding="utf-8")
