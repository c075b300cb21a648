"""The tracking pieces on their own: config checks (before the model loads), the record
format, the byte cap, the rollout log's resume rule, writes on a really full disk, the
report's rollout sections. The whole run is in ``test_tracking_run.py``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.trainer.tmpfs import run_on_tmpfs, tmpfs_runner
from trainer_client.cli import train_main
from trainer_client.config import load_config
from trainer_client.model.rollout import Completion
from trainer_client.report import format_rollouts, main, rollout_summary
from trainer_client.reward_client import ScoreResult
from trainer_client.tracking import backends, files, records, rollout_log, settings, tracker
from trainer_client.tracking.backends import pick_samples, samples_markdown, scalars_of
from trainer_client.tracking.files import DiskFullError, JsonlAppender, write_text_atomic
from trainer_client.tracking.records import (
    advantages_in_loss,
    fit_to_bytes,
    generation_records,
    rule_of,
)
from trainer_client.tracking.rollout_log import RolloutLog

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny-cpu.yaml"


@pytest.mark.parametrize("mod", [backends, files, records, rollout_log, settings, tracker])
def test_all_is_complete(mod):
    public = {n for n, v in vars(mod).items() if not n.startswith("_")
              and getattr(v, "__module__", None) == mod.__name__}
    assert public <= set(mod.__all__), public - set(mod.__all__)
    assert all(hasattr(mod, n) for n in mod.__all__)


# -- config: unknown names at load, missing packages and unwritable dirs before the model --

@pytest.mark.parametrize(("log", "match"), [
    ({"loggers": ["tensorboard", "neptune"]}, "config.log.loggers: unknown logger 'neptune'"),
    ({"loggers": "wandb"}, "config.log.loggers: expected a list"),
    ({"loggers": ["wandb", "wandb"]}, "named twice"),
    ({"rollouts_every": -1}, "config.log.rollouts_every"),
    ({"rollouts_max_bytes": 1.5}, "config.log.rollouts_max_bytes"),
    ({"wandb_mode": "cloud"}, "config.log.wandb_mode"),
    ({"rollout_every": 1}, r"config.log: unknown keys \['rollout_every'\]"),
])
def test_bad_log_section_is_refused_at_load(log, match):
    with pytest.raises(ValueError, match=match):
        load_config(TINY, overrides={"log": log})


def _cli(tmp_path: Path, log: dict, out: Path) -> int:
    """``grpo-train`` on the tiny config with a ``log`` section; no service listens at the
    URL, so a run that got past the checks would exit 2, not 1."""
    raw = yaml.safe_load(TINY.read_text())
    raw["log"] = {**raw.get("log", {}), **log}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw))
    return train_main(["--config", str(path), "--output-dir", str(out), "--backend", "local",
                       "--reward-url", "http://127.0.0.1:9", "--no-progress"])


def test_unknown_logger_exits_1_from_the_cli(tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli(tmp_path, {"loggers": ["tensorbord"]}, out) == 1
    err = capsys.readouterr().err
    assert "bad config: config.log.loggers: unknown logger 'tensorbord'" in err, err
    assert not out.exists()


@pytest.mark.parametrize(("logger", "hidden"), [("wandb", "wandb"), ("mlflow", "mlflow"),
                                                ("mlflow", "sqlalchemy"),
                                                ("tensorboard", "tensorboard")])
def test_missing_logger_package_is_a_clear_error_before_the_model_loads(
        tmp_path, capsys, monkeypatch, logger, hidden):
    # ``sys.modules[name] = None`` is Python's own way to make ``import name`` fail
    monkeypatch.setitem(sys.modules, hidden, None)
    out = tmp_path / "out"
    before = set(sys.modules)
    try:
        assert _cli(tmp_path, {"loggers": [logger]}, out) == 1
    finally:  # a package imported while its dependency was hidden (mlflow without
        # sqlalchemy) is half set up: later tests of this process must import it afresh
        for name in set(sys.modules) - before:
            del sys.modules[name]
    err = capsys.readouterr().err
    assert f"bad config: config.log.loggers: {logger!r} needs the {hidden!r} package" in err
    assert "Traceback" not in err
    assert out.is_dir() and not (out / "base_model").exists()  # stopped before the model


def test_unwritable_output_dir_is_a_clear_error_before_the_model_loads(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    assert _cli(tmp_path, {}, blocker / "run") == 1  # a directory cannot be made in a file
    err = capsys.readouterr().err
    assert "bad config: config.run.output_dir (--output-dir): cannot write to" in err, err
    assert "Not a directory" in err


# -- the record format --------------------------------------------------------------------

class _P:
    def __init__(self, pid: str, gold: str) -> None:
        self.id, self.ground_truth, self.question = pid, gold, f"question {pid}"


def _result(status: str, score: float = 0.0, reason: str | None = None) -> ScoreResult:
    return ScoreResult(score=score, status=status, extracted="5", scorer="gsm8k",
                       reason=reason)


def test_generation_records_one_per_completion_with_the_services_verdict():
    problems = [_P("a", "5"), _P("b", "7")]
    comps = [Completion([1], [2, 3], "#### 5", True), Completion([1], [2, 3, 4], "5 or 6", True),
             Completion([1], [9], "####", False), Completion([1], [9, 9], "x", True)]
    results = [_result("correct", 1.0), _result("incorrect", 0.0, "hedged: 2 distinct final "
                                                               "answers offered (5; 6)"),
               _result("timeout", 0.0, "deadline"), None]
    recs = generation_records(3, problems, comps, results, prompts=["pa", "pb"],
                              advantages=[1.0, -1.0, None, 0.5])
    assert [(r["id"], r["sample"]) for r in recs] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert [r["prompt"] for r in recs] == ["pa", None, "pb", None]  # once per group
    assert [r["question"] for r in recs] == ["question a", None, "question b", None]
    assert [r["reward"] for r in recs] == [1.0, 0.0, None, None]  # timeout: not a reward
    assert [r["status"] for r in recs] == ["correct", "incorrect", "timeout", "unavailable"]
    assert [r["rule"] for r in recs] == [None, "hedged", None, None]
    assert [r["tokens"] for r in recs] == [2, 3, 1, 2]
    assert [r["complete"] for r in recs] == [True, True, False, False]
    assert [r["advantage"] for r in recs] == [1.0, -1.0, None, 0.5]
    assert recs[1]["reason"].startswith("hedged: ") and recs[0]["scorer"] == "gsm8k"
    assert recs[3]["scorer"] is None and recs[3]["extracted"] is None
    assert all(r["step"] == 3 and r["clipped"] is False for r in recs)
    with pytest.raises(ValueError, match="do not split"):
        generation_records(1, problems, comps[:3], results[:3])
    with pytest.raises(ValueError, match="differ in length"):
        generation_records(1, problems, comps, results[:2])
    assert rule_of("unclosed_think: no </think>") == "unclosed_think"
    assert rule_of("no number found") is None and rule_of("nonsense: x") is None


def test_advantages_in_loss_follow_the_completions_trained_on():
    rolled = [object() for _ in range(6)]  # 3 groups of 2
    # all trained; the third sample's reward was invalid
    assert advantages_in_loss(rolled, rolled, [1.0, -1.0, 0.0, 0.0, 0.5, -0.5],
                              [True, True, False, True, True, True]) == [
        1.0, -1.0, None, 0.0, 0.5, -0.5]
    # dynamic sampling kept groups 2 and 0, in that order
    kept = [rolled[4], rolled[5], rolled[0], rolled[1]]
    assert advantages_in_loss(rolled, kept, [0.5, -0.5, 1.0, -1.0], [True] * 4) == [
        1.0, -1.0, None, None, 0.5, -0.5]
    with pytest.raises(ValueError, match="differ in length"):
        advantages_in_loss(rolled, kept, [0.5], [True])


def _long_records(n: int, chars: int, ch: str = "x") -> list[dict]:
    return [{"step": 1, "id": f"p{i}", "sample": 0, "prompt": "Q" * chars,
             "response": f"START{ch * chars}END", "clipped": False} for i in range(n)]


@pytest.mark.parametrize("ch", ["x", "\u00e9", "\U0001f600"])  # 1, 2 and 4 UTF-8 bytes
def test_byte_cap_clips_texts_keeps_every_line(ch):
    recs = _long_records(10, 5_000, ch)
    full = len(records.jsonl_text(recs).encode())
    out = fit_to_bytes(recs, 20_000)
    assert full > 20_000 >= len(records.jsonl_text(out).encode())
    assert [r["id"] for r in out] == [r["id"] for r in recs]  # no line dropped
    for r in out:
        assert r["clipped"] and r["response_chars"] == 5_008
        assert r["response"].startswith("START") and r["response"].endswith("END")
        assert "chars cut]" in r["response"]
    assert fit_to_bytes(recs, 0) is recs  # 0: no cap
    assert fit_to_bytes(recs, full) is recs  # under the cap: untouched


def test_byte_cap_below_the_metadata_keeps_every_line_with_empty_texts():
    out = fit_to_bytes(_long_records(5, 1000), 50)
    assert len(out) == 5 and all(r["response"] == "" and r["prompt"] == "" for r in out)


# -- the rollout log: resume moves later steps aside, never rewrites earlier ones ----------

def test_rollout_log_resume_keeps_earlier_steps_and_moves_later_ones_aside(tmp_path):
    root = tmp_path / "rollouts"
    log = RolloutLog(root, every=2, max_bytes=0, keep_through=0)
    assert [s for s in range(1, 7) if log.wants(s)] == [2, 4, 6]
    for s in (2, 4, 6):
        log.write(s, [{"step": s, "n": 1}])
    before = {s: (root / f"step_{s}.jsonl").read_bytes() for s in (2, 4)}
    RolloutLog(root, every=2, max_bytes=0, keep_through=4)  # resumed from step 4
    assert [s for s, _ in rollout_log.step_files(root)] == [2, 4]
    assert {s: (root / f"step_{s}.jsonl").read_bytes() for s in (2, 4)} == before
    moved = list((root / "discarded").iterdir())
    assert len(moved) == 1 and moved[0].name.startswith("step_6.")
    assert json.loads(moved[0].read_text()) == {"step": 6, "n": 1}
    RolloutLog(root, every=1, max_bytes=0, keep_through=-1)  # a fresh run in the same dir
    assert rollout_log.step_files(root) == []
    assert len(list((root / "discarded").iterdir())) == 3


@pytest.mark.parametrize("every", [0, 1])
def test_tracker_applies_the_resume_rule_to_eval_files_and_a_switched_off_log(tmp_path, every):
    for d, steps in (("eval", (0, 2, 3)), ("rollouts", (1, 2, 3))):
        (tmp_path / d).mkdir()
        for s in steps:
            (tmp_path / d / f"step_{s}.jsonl").write_text(f'{{"step": {s}}}\n')
    log = settings.LogSettings(loggers=(), rollouts_every=every)
    tracker.RunTracker(log, tmp_path, start_step=2, resumed=True, config={}).close()
    assert [s for s, _ in rollout_log.step_files(tmp_path / "eval")] == [0, 2]  # 3 aside
    assert [s for s, _ in rollout_log.step_files(tmp_path / "rollouts")] == [1, 2]
    tracker.RunTracker(log, tmp_path, start_step=0, resumed=False, config={}).close()
    for d in ("eval", "rollouts"):  # a fresh run: metrics.jsonl starts anew, so do these
        assert rollout_log.step_files(tmp_path / d) == []
        assert len(list((tmp_path / d / "discarded").iterdir())) == 3


# -- what the loggers get -----------------------------------------------------------------

def test_scalars_are_the_rows_finite_numbers():
    row = {"step": 3, "a/b": 0.5, "c": 2, "d": None, "e": float("nan"), "f": "text",
           "g": float("inf"), "train/skipped": 0}
    assert scalars_of(row) == {"a/b": 0.5, "c": 2.0, "train/skipped": 0.0}


def test_sample_table_escapes_cells_and_spreads_the_picks():
    recs = [{"id": f"p{i}", "sample": i % 2, "reward": 1.0, "status": "correct",
             "reason": "a|b", "extracted": "5", "advantage": None,
             "response": "line1\nline2"} for i in range(10)]
    picked = pick_samples(recs, 3)
    assert [r["id"] for r in picked] == ["p0", "p3", "p6"]
    md = samples_markdown(7, picked)
    rows = [x for x in md.splitlines() if x.startswith("| p")]
    assert len(rows) == 3 and "a\\|b" in rows[0] and "\n" not in rows[0]
    assert rows[0].count(" | ") == len(backends.SAMPLE_COLUMNS) - 1
    assert pick_samples(recs, 0) == [] and len(pick_samples(recs[:2], 5)) == 2


# -- a really full disk (a small tmpfs): no half line, no half file, a clear error --------

_FULL_DISK = r'''
import json, os, sys
from pathlib import Path
from trainer_client.tracking.files import DiskFullError, JsonlAppender, write_text_atomic
d = Path(sys.argv[1])
ours, plain, whole = d / "ours.jsonl", d / "plain.jsonl", d / "whole.jsonl"
for f in (ours, plain):  # 4001 bytes: the file's first page has 95 bytes to spare
    f.write_text("a" * 4000 + "\n")
write_text_atomic(whole, "old\n")
fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT)
try:
    while os.write(fd, b"\0" * 4096):
        pass
except OSError:
    pass
os.close(fd)
out = {}
app = JsonlAppender(ours)
try:
    app.append("b" * 500)
    out["ours"] = "written"
except DiskFullError as e:
    out["ours"] = str(e)
try:  # the control: Python's buffered append, as metrics.jsonl was written before
    with open(plain, "a") as fh:
        fh.write("b" * 500 + "\n")
    out["plain"] = "written"
except OSError as e:
    out["plain"] = str(e)
try:
    write_text_atomic(whole, "new\n" * 10_000)
    out["whole"] = "written"
except DiskFullError as e:
    out["whole"] = str(e)
out["sizes"] = {f.name: f.stat().st_size for f in (ours, plain)}
out["whole_text"] = whole.read_text()
out["left"] = sorted(p.name for p in d.iterdir())
print(json.dumps(out))
'''


def test_a_full_disk_leaves_no_half_line_and_no_half_file(tmp_path):
    prefix = tmpfs_runner(tmp_path)
    if isinstance(prefix, str):
        pytest.skip(prefix)
    mnt = tmp_path / "mnt"
    script = tmp_path / "full_disk.py"
    script.write_text(_FULL_DISK)
    r = run_on_tmpfs(prefix, mnt, "64k", f"{sys.executable} {script} {mnt}", timeout_s=120,
                     env={"PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ours"].startswith("disk full writing ") and "ours.jsonl" in out["ours"]
    assert "No space left on device" in out["ours"]
    assert out["sizes"]["ours.jsonl"] == 4001  # the line is not there, not even in part
    # control: the same append through a buffered file leaves the head of the line behind
    assert out["plain"] != "written" and out["sizes"]["plain.jsonl"] > 4001
    assert out["whole"].startswith("disk full writing ")
    assert out["whole_text"] == "old\n"  # the old file, whole
    assert out["left"] == ["filler", "ours.jsonl", "plain.jsonl", "whole.jsonl"]  # no .tmp


def test_disk_full_error_only_for_full_filesystems(tmp_path):
    with pytest.raises(DiskFullError, match="disk full writing x: No space left"), \
            files.disk_full_as_error("x"):
        raise OSError(28, "No space left on device")
    with pytest.raises(PermissionError), files.disk_full_as_error("x"):
        raise PermissionError(13, "Permission denied")
    app = JsonlAppender(tmp_path / "m.jsonl")
    app.append('{"step": 1}')
    app.close()
    with pytest.raises(ValueError, match="closed"):
        app.append("{}")
    write_text_atomic(tmp_path / "w.txt", "x")
    assert (tmp_path / "m.jsonl").read_text() == '{"step": 1}\n'


# -- the report's rollout sections --------------------------------------------------------

def _rec(step, pid, k, status, tokens, reason=None, reward=None):
    return {"step": step, "id": pid, "sample": k, "prompt": None, "response": f"r{pid}{k}",
            "tokens": tokens, "finished": True, "reward": reward, "status": status,
            "correct": status == "correct", "complete": True, "extracted": "1",
            "reason": reason, "rule": rule_of(reason), "scorer": "gsm8k", "ground_truth": "1",
            "advantage": 0.0, "clipped": False}


def test_report_reads_status_mix_rule_overrides_and_lengths_from_the_log(tmp_path, capsys):
    s1 = [_rec(1, "a", 0, "correct", 10, reward=1.0), _rec(1, "a", 1, "incorrect", 30),
          _rec(1, "b", 0, "incorrect", 50, "hedged: 2 distinct final answers offered"),
          _rec(1, "b", 1, "no_answer", 40, "unclosed_think: <think> never closed")]
    s3 = [_rec(3, "c", 0, "correct", 20, reward=1.0), _rec(3, "c", 1, "correct", 30),
          _rec(3, "d", 0, "incorrect", 10, "hedged: 2 distinct final answers offered"),
          _rec(3, "d", 1, "incorrect", 20, "hedged: 3 distinct final answers offered")]
    for step, recs in ((1, s1), (3, s3)):
        (tmp_path / "rollouts").mkdir(exist_ok=True)
        (tmp_path / "rollouts" / f"step_{step}.jsonl").write_text(records.jsonl_text(recs))
    s = rollout_summary(tmp_path)
    assert s is not None
    assert s.statuses[1] == Counter(correct=1, incorrect=2, no_answer=1)
    assert s.rules == {1: Counter(hedged=1, unclosed_think=1), 3: Counter(hedged=2)}
    assert s.tokens == {"correct": (3, 60), "incorrect": (4, 110), "no_answer": (1, 40)}
    text = format_rollouts(s)
    assert "| 1 | 4 | 1 | 2 | 1 | hedged 1, unclosed_think 1 |" in text
    assert "| 3 | 4 | 2 | 2 | 0 | hedged 2 |" in text
    assert "Rule overrides over the log: hedged 3, unclosed_think 1." in text
    # correct 60/3 tokens over all steps, 10 at step 1, 25 at step 3; incorrect 110/4, 40, 15
    assert "| correct | 20.0 (3) | 10.0 (1) | 25.0 (2) |" in text
    assert "| incorrect | 27.5 (4) | 40.0 (2) | 15.0 (2) |" in text
    assert "`b` sample 1: **no_answer**" in text and "reason: unclosed_think" in text
    assert "last logged step (3)" in text and "rc1" in text
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "rewards/mean": 0.25}) + "\n")
    assert main([str(tmp_path)]) == 0
    assert "Rollout log (`rollouts/step_<N>.jsonl`): 2 logged steps, 8 completions" in (
        capsys.readouterr().out)
    assert rollout_summary(tmp_path / "nowhere") is None
