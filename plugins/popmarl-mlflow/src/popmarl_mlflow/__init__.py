"""popmarl-mlflow: MLflow tracking (tracker ``mlflow``), run plots (tracker ``plots``) and
``popmarl sync-mlflow RUN_DIR``. Importing this package imports neither MLflow nor
matplotlib; they load when a tracker starts or a plot is drawn."""

from __future__ import annotations

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__version__ = "0.1.0"
