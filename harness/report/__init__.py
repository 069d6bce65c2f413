"""``harness report``: training reward beside held-out score per checkpoint and reward, with a divergence alarm.

Reads a run's spans back (the file store that :mod:`harness.telemetry` writes, or Phoenix's or MLflow's REST API;
:mod:`harness.report.sources`), groups held-out evaluations (:mod:`harness.report.evaluations`), joins and renders
(:mod:`harness.report.build`). It writes no spans and runs no model.
"""

from harness.report.build import (
    CheckpointRow,
    Report,
    build_report,
    divergence_alarms,
    format_table,
    plot_report,
    to_markdown,
    write_report,
)
from harness.report.evaluations import Evaluation, group_evaluations, select_evaluations
from harness.report.sources import SourceError, load_file_store, load_mlflow, load_phoenix

__all__ = ["CheckpointRow", "Report", "build_report", "divergence_alarms", "format_table", "plot_report"]
__all__ += ["to_markdown", "write_report", "Evaluation", "group_evaluations", "select_evaluations", "SourceError"]
__all__ += ["load_file_store", "load_mlflow", "load_phoenix"]
