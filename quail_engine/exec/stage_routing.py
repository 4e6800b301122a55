"""Where stage messages go while a query runs.

Lower layers (infer/, plan/) never import exec/: they log stage messages (converting and
loading the model, the CPU probe) at INFO on the logger `quail_engine.stage`.
`route_stages(sink)` sends those records to `sink(text)`: the CLI passes its
`cli/stages.show_stage` (into the open progress display), the dbt adapter its AdapterLogger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

STAGE_LOGGER = "quail_engine.stage"


class _StageHandler(logging.Handler):
    def __init__(self, sink: Callable[[str], None]):
        super().__init__(logging.INFO)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink(record.getMessage())
        except Exception:  # noqa: BLE001 - logging's own convention
            self.handleError(record)


def route_stages(sink: Callable[[str], None] | None) -> None:
    """Send `quail_engine.stage` INFO records to `sink(text)`; `None` undoes it. Calling it
    again replaces the previous sink. Records still propagate (to -v's log, to tests)."""
    logger = logging.getLogger(STAGE_LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _StageHandler)]:
        logger.removeHandler(handler)
    if sink is not None:
        logger.addHandler(_StageHandler(sink))
    logger.setLevel(logging.NOTSET if sink is None else logging.INFO)
