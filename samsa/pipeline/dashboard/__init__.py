"""The pipeline's live web dashboard: city AQI over time, alerts, sensors and pipeline health,
and beside it a broker console: brokers, topics, consumer groups and their lag.

`Dashboard` (app.py) runs a reader thread (reader.py) that follows the pipeline's topics into an
in-memory state (state.py, health.py; shared through live.py) and an HTTP server (web.py) that
serves the page (static/), the state as JSON and server-sent events. No dependency beyond
confluent-kafka, Samsa's own protocol code and the standard library; the page loads nothing from
outside the server.

The broker console (the page's second tab, static/console.js) has a poller thread of its own
(console_poller.py): while a page shows the tab (an open /events?view=console stream) or for a
minute after a GET /api/console, it asks the cluster every `console_interval_s` with an
AdminClient (Metadata, ListOffsets, DescribeConfigs, ListGroups, DescribeGroups, OffsetFetch) and
Samsa's own client (DescribeLogDirs, DescribeLogCleaner), and publishes the view that
console.py's pure `build_view` derives from the answers (live.py's `Published`). A cluster that
does not answer is a view that says so, never an exception.
"""

from samsa.pipeline.dashboard.app import Dashboard
from samsa.pipeline.dashboard.state import CATEGORY_COLORS, PipelineTopics

__all__ = ["CATEGORY_COLORS", "Dashboard", "PipelineTopics"]
