"""`db import --from goodbuddy APP.db`: the GoodBuddy desktop app's assistant database as an import source.

The app database is opened read-only through a `mode=ro` URI (never `immutable`: the app may be
running and writing through its WAL) and read in one read transaction, so one import sees one
consistent snapshot while the app keeps working. Only schema version 62 is read; any other version
is refused with one line. Every row becomes interchange lines (docs/interchange.md has the mapping
and every upstream field left out, and why), each tagged with the table and row it came from.

Re-import is a sync (server/store/sync.py): ids are the app's ids, an object whose content changed
upstream (a confirmed entity, an edited message, a concluded story) is updated in place, and an event
the app marks superseded by a later review of the same scope, or a story or experience it no longer
shows, is retired. Stories and experiences follow this graph's scope rules (story_mapping.py): what
the app links across scopes is left out and counted in the notes.

Memory does not grow with the app's history: every table is read as a stream, and what the readers need
to know about rows read earlier (scopes, results, the newest fragment of each source) is kept in
temporary tables of the app connection (state.py), which SQLite spills to a temporary file.
"""

from server.store.goodbuddy.database import SUPPORTED_SCHEMA, open_app_database
from server.store.goodbuddy.source import GoodBuddySource, import_goodbuddy

__all__ = ["SUPPORTED_SCHEMA", "GoodBuddySource", "import_goodbuddy", "open_app_database"]
