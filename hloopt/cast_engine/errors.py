"""The one exception type the cast engine raises for bad input."""


class CastError(ValueError):
    """A cast request the engine refuses: unknown dtype, ragged bytes, bad layout.

    It subclasses ValueError so callers that already treat bad arguments as
    ValueError keep working, while the CLI can catch exactly this type and turn
    it into a one-line message instead of a traceback.
    """
