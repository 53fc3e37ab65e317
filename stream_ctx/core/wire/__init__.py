"""The wire types and their codecs: events in (`events`), bundles out (`bundle`), bytes to and
from both (`codec`)."""
