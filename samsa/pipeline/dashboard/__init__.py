"""The pipeline's live web dashboard: city AQI over time, alerts, sensors and pipeline health.

`Dashboard` (app.py) runs a reader thread (reader.py) that follows the pipeline's topics into an
in-memory state (state.py, health.py; shared through live.py) and an HTTP server (web.py) that
serves the page (static/), the state as JSON and server-sent events. No dependency beyond
confluent-kafka and the standard library; the page loads nothing from outside the server.
"""

from samsa.pipeline.dashboard.app import Dashboard
from samsa.pipeline.dashboard.state import CATEGORY_COLORS, PipelineTopics

__all__ = ["CATEGORY_COLORS", "Dashboard", "PipelineTopics"]
