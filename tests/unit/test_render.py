from sagactl.commands.render import _clock


def test_clock_shows_milliseconds_whatever_the_timestamp_precision() -> None:
    assert _clock("2026-11-29T19:44:45+00:00") == "19:44:45.000"
    assert _clock("2026-11-29T19:44:45.123456+00:00") == "19:44:45.123"
    assert _clock("2026-11-29T19:44:45.5+00:00") == "19:44:45.500"


def test_clock_leaves_what_it_cannot_read() -> None:
    assert _clock("not a time") == "not a time"
