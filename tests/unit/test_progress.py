"""The progress bar: drawn on a terminal only, silent under --json or when piped."""

from __future__ import annotations

import io

import pytest

from osrag.progress import Progress, wanted


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ClosedStream(io.StringIO):
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_not_a_tty_draws_nothing() -> None:
    out = io.StringIO()  # a pipe or a log file: isatty() is False
    with Progress("doc", total=3, stream=out) as bar:
        assert not bar.enabled
        for _ in range(3):
            bar.advance("indexed")
        bar.update_to(3, 3)
    assert out.getvalue() == ""


def test_json_is_quiet_even_on_a_terminal() -> None:
    out = FakeTerminal()
    with Progress("doc", total=3, quiet=True, stream=out) as bar:
        bar.advance("indexed")
    assert not bar.enabled and out.getvalue() == ""


def test_terminal_gets_a_bar() -> None:
    out = FakeTerminal()
    with Progress("doc", total=2, stream=out) as bar:
        assert bar.enabled
        bar.advance("indexed")
        bar.advance("failed")
    text = out.getvalue()
    assert "0/2" in text and "doc/s" in text  # drawn (tqdm throttles redraws; close clears it)


def test_update_to_sets_position_and_total() -> None:
    out = FakeTerminal()
    with Progress("chunk", stream=out) as bar:
        bar.update_to(40, 100)
        bar.update_to(100, 100)
    assert "100/100" in out.getvalue()


def test_odd_streams_are_not_terminals() -> None:
    assert not wanted(False, ClosedStream())
    assert not wanted(False, object())  # type: ignore[arg-type]


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("doc", total=1) as bar:  # pytest's captured stderr is not a terminal
        bar.advance()
    assert capsys.readouterr().err == ""
