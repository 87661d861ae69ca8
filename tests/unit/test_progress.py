"""The progress bar: drawn on a terminal only, silent under --json or when piped."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from osrag.progress import Progress, Throughput, wanted


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


def test_log_lines_pass_through_with_or_without_a_bar() -> None:
    plain = io.StringIO()
    with Progress("step", stream=plain) as bar:
        bar.write("eval: index ready")
        bar.advance()
    assert plain.getvalue() == "eval: index ready\n"
    term = FakeTerminal()
    with Progress("step", stream=term) as bar:
        bar.write("eval: index ready")
        bar.advance()
    assert "eval: index ready" in term.getvalue() and "step" in term.getvalue()


# ------------------------------------------------------------------ the CLI hook-up (eval)
def _fake_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace the eval run (minutes against a node) by one that logs two steps; what is
    under test is how the CLI shows them, not the evaluation."""
    from osrag import evaluation

    def run(settings: object, cfg: object, log: Callable[[str], None]) -> dict[str, object]:
        log("golden/main: 36 indexed, 0 unchanged")
        log("golden: done in 3 s")
        return {"sets": []}

    monkeypatch.setattr(evaluation, "run", run)
    monkeypatch.setattr(evaluation, "format_table", lambda report: "the table")


@pytest.mark.parametrize("args", [[], ["--json"]])
def test_eval_off_a_terminal_prints_log_lines_and_no_bar(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    from click.testing import CliRunner

    from osrag.cli import cli

    _fake_eval(monkeypatch)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["eval", str(golden), *args], env={"OSRAG_URL": "http://127.0.0.1:1"})
    assert res.exit_code == 0, res.output
    assert res.stderr == "eval: golden/main: 36 indexed, 0 unchanged\neval: golden: done in 3 s\n"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_eta_counts_only_work_since_the_first_observation() -> None:
    from osrag.progress import Throughput

    clock = Clock()
    rate = Throughput(clock, settle_s=1.0)
    assert rate.eta_s(10) is None
    clock.t += 12  # twelve seconds of model loading: not in the rate
    rate.observe(0)
    assert rate.eta_s(10) is None  # nothing moved yet
    clock.t += 2
    rate.observe(4)  # 2 docs/s since the first observation
    assert rate.eta_s(10) == pytest.approx(3.0)
    clock.t += 1
    rate.observe(4)  # a stall lowers the measured rate: 4 docs in 3 s
    assert rate.eta_s(10) == pytest.approx(4.5)


def test_the_ingest_bar_moves_while_a_batch_is_embedded() -> None:
    from osrag.progress import IngestBar

    out = FakeTerminal()
    with IngestBar(10, stream=out) as bar:
        assert bar.enabled and "reading files, loading the model" in out.getvalue()
        bar.outcome("a.md", "skipped")  # unchanged: settled at once
        bar.embedded(0, 40, 8)
        bar.embedded(20, 40, 8)
        assert bar.position() == pytest.approx(1 + 4)
        bar.embedded(40, 40, 8)
        assert bar.position() == pytest.approx(9)
        for name in "bcdefghi":
            bar.outcome(name, "indexed")  # already counted as embedded: no double count
        assert bar.position() == pytest.approx(9)
        bar.outcome("j.md", "failed")
        assert bar.position() == pytest.approx(10)
    assert "embedding 20/40 chunks" in out.getvalue() and "docs" in out.getvalue()


def test_the_ingest_bar_is_silent_off_a_terminal() -> None:
    from osrag.progress import IngestBar

    out = io.StringIO()
    with IngestBar(3, stream=out) as bar:
        bar.embedded(1, 2, 3)
        bar.outcome("a", "skipped")
    assert out.getvalue() == "" and not bar.enabled


def test_clock_text() -> None:
    from osrag.progress import clock_text

    assert (clock_text(5), clock_text(65.4), clock_text(3723)) == ("0:05", "1:05", "1:02:03")


def test_update_to_shows_an_eta_only_from_measured_throughput() -> None:
    out = FakeTerminal()
    with Progress("chunk", stream=out, bar_format="{n_fmt}/{total_fmt}{postfix}") as bar:
        clock = Clock()
        bar._rate = Throughput(clock)
        bar.update_to(0, 100)
        assert "ETA: measuring" in out.getvalue()
        clock.t += 10
        bar.update_to(50, 100)
        assert out.getvalue().rstrip("\r\n ").endswith("ETA 0:10")


@pytest.mark.parametrize(
    ("env", "args", "want"),
    [
        ({}, [], (1500, 40)),
        ({"OSRAG_BUDGET_TOKENS": "700", "OSRAG_CANDIDATE_DEPTH": "25"}, [], (700, 25)),
        ({"OSRAG_BUDGET_TOKENS": "700"}, ["--budget", "300", "--depth", "12"], (300, 12)),
    ],
)
def test_eval_budget_and_depth_default_to_the_settings(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: dict[str, str],
    args: list[str],
    want: tuple[int, int],
) -> None:
    """The CLI does not restate a setting's default: unset, --budget/--depth are the settings'."""
    from click.testing import CliRunner

    from osrag import evaluation
    from osrag.cli import cli

    seen: list[tuple[int, int]] = []

    def run(settings: object, cfg: evaluation.EvalConfig, log: Callable[[str], None]) -> dict[str, object]:
        seen.append((cfg.budget, cfg.depth))
        return {"sets": []}

    monkeypatch.setattr(evaluation, "run", run)
    monkeypatch.setattr(evaluation, "format_table", lambda report: "the table")
    golden = tmp_path / "golden.jsonl"
    golden.write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        cli, ["eval", str(golden), *args], env={"OSRAG_URL": "http://127.0.0.1:1", **env}
    )
    assert res.exit_code == 0, res.output
    assert seen == [want]
