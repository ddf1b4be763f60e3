"""The rule engine: content-addressed, persistent, incremental queries (see engine.py)."""

from kinac.rules.engine import CycleError, Database
from kinac.rules.events import Event, EventLog
from kinac.rules.query import Query, input_query, query

__all__ = ["CycleError", "Database", "Event", "EventLog", "Query", "input_query", "query"]
