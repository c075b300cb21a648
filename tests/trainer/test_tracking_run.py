"""One short real run, read back from every place it logs to.

``configs/tiny-cpu.yaml`` in this process (backend local, 8 prompts x 8 samples a step)
against the real reward service on loopback, with TensorBoard and, where installed, W&B
(offline) and MLflow (local SQLite store): 4 steps, then a simulated crash after step 5's
rollouts and metrics were written but before its checkpoint, then ``--resume`` to step 6.
The reward client is spied on (wrapped, not replaced: the real service answers) to know
what the service returned for each step. One module-scoped run serves every assertion.
"""

from __future__ import annotations

import glob
import json
import math
import shutil
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

pytest.importorskip("reward_service.server.app",
                    reason="the reward service (extra 'service') is not installed")
pytest.importorskip("tensorboard", reason="the trainer extra (tensorboard) is not installed")

from tests.trainer.procs import procs_mentioning
from tests.trainer.tmpfs import run_on_tmpfs, tmpfs_runner
from trainer_client.config import load_config
from trainer_client.metrics import read_metrics
from trainer_client.reward_client import RewardClient, reward_or_none
from trainer_client.tracking.backends import pick_samples, samples_markdown, scalars_of

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny-cpu.yaml"
PROMPTS, N = 8, 8  # 64 completions a step
ROLLED = 9  # the module's run rolls out 9 groups a step and trains on 8 (dynamic sampling);
#            6 x 9 < the toy task's 55 problems: no problem twice in a step, so
#            "<id>#<sample>" names one completion of a step
HAVE = {name: __import__("importlib.util").util.find_spec(name) is not None
        for name in ("wandb", "mlflow", "sqlalchemy", "alembic")}
LOGGERS = ["tensorboard"] + (["wandb"] if HAVE["wandb"] else []) + (
    ["mlflow"] if HAVE["mlflow"] and HAVE["sqlalchemy"] and HAVE["alembic"] else [])

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@dataclass
class Run:
    out: Path
    scored: dict[int, list[tuple[Any, Any]]]  # step -> [(ScoreItem, ScoreResult)] it scored
    first_rollouts: dict[int, bytes] = field(default_factory=dict)  # after the first part
    planted: str = ""


def _cfg(url: str) -> Any:
    return load_config(TINY, overrides={
        "run": {"backend": "local", "prompts_per_step": PROMPTS, "rollout_prompts": ROLLED},
        "reward": {"urls": [url]}, "eval": {"every": 2}, "checkpoint": {"every": 2},
        "log": {"loggers": LOGGERS, "rollouts_every": 1, "text_samples": 3}})


def _newest_event_second(logdir: Path) -> int:
    """The newest whole-second timestamp in the names of ``logdir``'s event files."""
    return max(int(f.name.split(".")[3]) for f in logdir.glob("events.out.tfevents.*"))


def _next_second_after(second: int) -> None:
    """Wait for the wall clock to pass ``second`` (at most ~1 s): the event it waits on is
    the clock itself, which names the next event file."""
    while int(time.time()) <= second:
        time.sleep(0.02)


@pytest.fixture(scope="module")
def run(reward_url, tmp_path_factory) -> Run:
    from trainer_client.trainer import train

    out = tmp_path_factory.mktemp("tracked")
    calls: list[tuple[str, list, list]] = []
    lock = threading.Lock()
    real_score = RewardClient.score

    def spy(self, items, *a, **kw):
        results = real_score(self, items, *a, **kw)
        with lock:
            calls.append((threading.current_thread().name, list(items), list(results)))
        return results

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RewardClient, "score", spy)
        assert train(_cfg(reward_url), output_dir=out, max_steps=4).last_step == 4
        first = {s: (out / "rollouts" / f"step_{s}.jsonl").read_bytes() for s in range(1, 5)}
        # a crash after step 5's rollouts, metrics line and TensorBoard scalars, before its
        # checkpoint (at 6): what that attempt wrote must not survive the resume
        planted = json.dumps({"step": 5, "id": "crashed-attempt", "sample": 0}) + "\n"
        (out / "rollouts" / "step_5.jsonl").write_text(planted)
        with open(out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps({"step": 5, "rewards/mean": 99.0}) + "\n")
        from torch.utils.tensorboard import SummaryWriter

        # TensorBoard orders event files by name, a timestamp in whole seconds first (then
        # host, pid, and a per-process writer count compared as text: writer 10 sorts before
        # writer 9): a crashed attempt's file, as a real crash's, is from an earlier second
        # than the resumed run's, or the purge at the resume step never sees it
        _next_second_after(_newest_event_second(out / "tensorboard"))
        w = SummaryWriter(str(out / "tensorboard"), filename_suffix=".crashed")
        w.add_scalar("rewards/mean", 99.0, 5)
        w.close()
        _next_second_after(_newest_event_second(out / "tensorboard"))
        assert train(_cfg(reward_url), output_dir=out, max_steps=6, resume=True).last_step == 6
    # training chunks are scored on the "grpo-reward" threads, eval on the main thread;
    # every chunk of step t is scored before step t + 1 starts: 2 chunks a step, in order
    chunks = [(items, results) for name, items, results in calls
              if name.startswith("grpo-reward")]
    assert len(chunks) == 2 * 6, [c[0] for c in calls]
    scored = {s + 1: [pair for c in chunks[2 * s:2 * s + 2]
                      for pair in zip(c[0], c[1], strict=True)] for s in range(6)}
    return Run(out=out, scored=scored, first_rollouts=first, planted=planted)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_rollout_log_matches_what_the_service_scored_line_by_line(run):
    files = sorted(p.name for p in (run.out / "rollouts").glob("step_*.jsonl"))
    assert files == [f"step_{s}.jsonl" for s in range(1, 7)]
    for step in range(1, 7):
        lines = _lines(run.out / "rollouts" / f"step_{step}.jsonl")
        assert len(lines) == ROLLED * N  # one line per sampled completion, trained on or not
        keys = [f"{r['id']}#{r['sample']}" for r in lines]
        assert len(set(keys)) == len(keys)  # none twice
        # group after group, samples in order; the prompt on each group's first line
        assert [r["sample"] for r in lines] == list(range(N)) * ROLLED
        assert all((r["prompt"] is not None) == (r["sample"] == 0) for r in lines)
        assert all(r["prompt"] == r["id"].removeprefix("toy-") + "=" for r in lines
                   if r["prompt"] is not None)
        assert all((r["question"] is not None) == (r["sample"] == 0) for r in lines)
        scored = {item.id: (item, res) for item, res in run.scored[step]}
        assert set(scored) == set(keys)  # none missing, none extra
        for r in lines:
            item, res = scored[f"{r['id']}#{r['sample']}"]
            assert r["step"] == step
            assert r["response"] == item.response and r["ground_truth"] == item.ground_truth
            assert (r["status"], r["reason"], r["extracted"], r["scorer"]) == (
                res.status, res.reason, res.extracted, res.scorer)
            assert r["reward"] == reward_or_none(res)
            assert r["correct"] == (res.status == "correct")
            # tiny-cpu: one token, a digit (cut at max_new_tokens 1) or EOS (an empty answer)
            assert r["tokens"] == 1 and r["finished"] == (r["response"] == "")


def test_logged_advantages_are_the_groups_normalised_rewards(run):
    """Each trained group's lines carry (r - mean) / (std + 1e-4) of the logged rewards; the
    group that dynamic sampling left out (the first 8 with a reward spread are trained, or
    the first 8 when none has one) carries ``null``."""
    rows = {r["step"]: r for r in read_metrics(run.out / "metrics.jsonl")}
    left_out = 0
    for step in range(1, 7):
        lines = _lines(run.out / "rollouts" / f"step_{step}.jsonl")
        want = {}
        for g in range(ROLLED):
            rs = [r["reward"] for r in lines[g * N:(g + 1) * N]]
            assert all(x is not None for x in rs)  # tiny-cpu: every item scored
            mean = sum(rs) / N
            std = math.sqrt(sum((x - mean) ** 2 for x in rs) / (N - 1))
            want[g] = [0.0 if std == 0 else (x - mean) / (std + 1e-4) for x in rs]
        spread = [g for g in range(ROLLED) if any(want[g])]
        kept = spread[:PROMPTS] or list(range(PROMPTS))
        assert rows[step]["train/groups_trained"] == len(spread[:PROMPTS])
        for g in range(ROLLED):
            got = [r["advantage"] for r in lines[g * N:(g + 1) * N]]
            if g in kept:
                assert got == pytest.approx(want[g], abs=1e-5), (step, g)
            else:
                assert got == [None] * N, (step, g)
                left_out += 1
    assert left_out >= 6  # at least one group a step (9 rolled out, at most 8 trained)


def test_metrics_rows_agree_with_the_rollout_log(run):
    rows = {r["step"]: r for r in read_metrics(run.out / "metrics.jsonl")}
    assert sorted(rows) == list(range(1, 7))  # the crashed attempt's step-5 line is gone
    for step in range(1, 7):
        lines = _lines(run.out / "rollouts" / f"step_{step}.jsonl")
        rewards = [r["reward"] for r in lines]
        assert rows[step]["rewards/mean"] == pytest.approx(sum(rewards) / len(rewards))
        for status in ("correct", "incorrect", "no_answer"):
            assert rows[step][f"rewards/status/{status}"] == pytest.approx(
                sum(r["status"] == status for r in lines) / len(lines))


def test_resume_appends_and_never_rewrites_or_repeats_a_step(run):
    roll = run.out / "rollouts"
    for s, data in run.first_rollouts.items():
        assert (roll / f"step_{s}.jsonl").read_bytes() == data  # steps 1-4 untouched
    moved = list((roll / "discarded").iterdir())  # the crashed attempt's step 5, kept aside
    assert len(moved) == 1 and moved[0].read_text() == run.planted
    assert "crashed-attempt" not in (roll / "step_5.jsonl").read_text()


def test_eval_files_use_the_same_record_format(run):
    rec = _lines(run.out / "rollouts" / "step_2.jsonl")[0]
    ev = _lines(run.out / "eval" / "step_2.jsonl")
    assert len(ev) == 55 and set(ev[0]) == set(rec)
    assert all(e["step"] == 2 and e["sample"] == 0 and e["advantage"] is None for e in ev)
    assert all(e["prompt"] == e["id"].removeprefix("toy-") + "=" for e in ev)


# -- TensorBoard ---------------------------------------------------------------------------

def _accumulator(run: Run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run.out / "tensorboard"), size_guidance={"scalars": 0,
                                                                       "tensors": 0})
    ea.Reload()
    return ea


def test_tensorboard_has_every_scalar_of_metrics_jsonl_at_its_step(run):
    ea = _accumulator(run)
    rows = read_metrics(run.out / "metrics.jsonl")
    expected: dict[str, dict[int, float]] = {}
    for row in rows:
        for k, v in scalars_of(row).items():
            expected.setdefault(k, {})[row["step"]] = v
    assert set(ea.Tags()["scalars"]) == set(expected)
    for tag, by_step in expected.items():
        events = ea.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), (tag, steps)  # the crashed step 5 purged
        got = {e.step: e.value for e in events}
        assert set(got) == set(by_step), tag
        for s, v in by_step.items():  # TensorBoard keeps float32
            assert got[s] == pytest.approx(v, rel=1e-6, abs=1e-30), (tag, s)
    assert len(rows) == 6 and 99.0 not in {e.value for e in ea.Scalars("rewards/mean")}


def test_tensorboard_text_shows_sampled_completions_of_each_step(run):
    ea = _accumulator(run)
    assert "completions/text_summary" in ea.Tags()["tensors"]
    texts = {e.step: e.tensor_proto.string_val[0].decode()
             for e in ea.Tensors("completions/text_summary")}
    assert sorted(texts) == list(range(1, 7))
    for step, text in texts.items():
        lines = _lines(run.out / "rollouts" / f"step_{step}.jsonl")
        assert text == samples_markdown(step, pick_samples(lines, 3))
        assert "| status |" in text and "reward" in text


def test_tensorboard_server_serves_the_reward_series(run, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(run.out / "tensorboard"),
         "--host", "127.0.0.1", "--port", "0", "--load_fast", "false",
         "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()  # "TensorBoard 2.x at http://127.0.0.1:PORT/ ..."
            if not line and proc.poll() is not None:
                pytest.fail(f"tensorboard exited {proc.returncode}")
            if " at http://127.0.0.1:" in line:
                url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        assert url is not None, "tensorboard did not say where it listens"
        series = None
        while time.monotonic() < deadline:  # its first load of the logdir is asynchronous
            r = httpx.get(f"{url}/data/plugin/scalars/scalars",
                          params={"run": ".", "tag": "rewards/mean"}, timeout=10)
            if r.status_code == 200 and len(r.json()) == 6:
                series = r.json()
                break
            time.sleep(0.5)
        assert series is not None, "no rewards/mean series served"
        rows = {r["step"]: r["rewards/mean"] for r in read_metrics(run.out / "metrics.jsonl")}
        assert [s for _, s, _ in series] == list(range(1, 7))
        for _, s, v in series:
            assert v == pytest.approx(rows[s], rel=1e-6)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode is not None


# -- W&B (offline) -------------------------------------------------------------------------

def _wandb_history(path: str) -> list[dict[str, Any]]:
    """History rows of an offline W&B run file, read with W&B's own record schema.

    wandb 0.31 ships no Python reader for ``run-*.wandb`` (its Go core writes it); the file is
    LevelDB's log format (32 KiB blocks of ``crc32 u32, length u16, type u8`` records) after
    a 7-byte ``:W&B`` header, each record a ``wandb_internal_pb2.Record``."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            if rec.WhichOneof("record_type") == "history":
                out.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                            for i in rec.history.item})
    return out


@pytest.mark.skipif(not HAVE["wandb"], reason="wandb is not installed (pip install wandb)")
def test_wandb_offline_run_has_every_scalar_at_its_step(run):
    files = sorted(glob.glob(str(run.out / "wandb" / "offline-run-*" / "run-*.wandb")))
    assert len(files) == 2  # the first part and the resumed one: one W&B run each
    hist = [_wandb_history(f) for f in files]
    rows = read_metrics(run.out / "metrics.jsonl")
    for row in rows:
        part = hist[0] if row["step"] <= 4 else hist[1]
        h = next(x for x in part if x.get("_step") == row["step"] and "rewards/mean" in x)
        for k, v in scalars_of(row).items():
            assert h[k] == pytest.approx(v, rel=1e-12), (row["step"], k)
    assert {x["_step"] for x in hist[0]} == {1, 2, 3, 4}
    assert any("completions/_type" in x for x in hist[1])  # the samples table
    deadline = time.monotonic() + 30  # wandb.teardown() stopped its wandb-core process
    while procs_mentioning("wandb-core") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert procs_mentioning("wandb-core") == []


# -- MLflow (local SQLite store) -------------------------------------------------------------

@pytest.mark.skipif("mlflow" not in LOGGERS, reason="mlflow (mlflow-skinny + sqlalchemy + "
                    "alembic) is not installed")
def test_mlflow_run_has_every_scalar_at_its_step(run):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{run.out / 'mlflow.db'}")
    exp = client.get_experiment_by_name("grpo")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    assert len(runs) == 2 and runs[1].data.tags["resumed_from_step"] == "4"
    assert all(r.info.status == "FINISHED" for r in runs)
    rows = read_metrics(run.out / "metrics.jsonl")
    for key in ("rewards/mean", "rewards/status/correct", "policy/entropy", "eval/accuracy",
                "timings/step_seconds"):
        got = {m.step: m.value for r in runs
               for m in client.get_metric_history(r.info.run_id, key)}
        want = {row["step"]: scalars_of(row)[key] for row in rows if key in scalars_of(row)}
        assert got == pytest.approx(want, rel=1e-12), key
    n_keys = {k for row in rows for k in scalars_of(row)}
    assert set(runs[0].data.metrics) | set(runs[1].data.metrics) == n_keys
    arts = [a.path for a in client.list_artifacts(runs[0].info.run_id, "completions")]
    assert arts == [f"completions/step_{s:06d}.md" for s in range(1, 5)]


# -- the report on this run --------------------------------------------------------------

def test_report_shows_the_rollout_sections(run, capsys):
    from trainer_client.report import main

    assert main([str(run.out)]) == 0
    text = capsys.readouterr().out
    assert "Rollout log (`rollouts/step_<N>.jsonl`): 6 logged steps, 432 completions" in text
    for step in range(1, 7):
        lines = _lines(run.out / "rollouts" / f"step_{step}.jsonl")
        c = {s: sum(r["status"] == s for r in lines) for s in ("correct", "incorrect")}
        assert f"| {step} | {ROLLED * N} | {c['correct']} | {c['incorrect']} |" in text
    assert "Completions of the first logged step (1)" in text
    assert "Completions of the last logged step (6)" in text


# -- a full disk mid-run ----------------------------------------------------------------------

def test_full_disk_mid_run_stops_with_a_message_and_no_half_line(reward_url, tmp_path):
    """``grpo-train`` with its output directory on a 700 KiB tmpfs: the tiny model (~530
    KiB) and the first steps fit, then a write fails with ENOSPC (which writer meets it
    first varies: the rollout log, metrics.jsonl or TensorBoard)."""
    prefix = tmpfs_runner(tmp_path)
    if isinstance(prefix, str):
        pytest.skip(prefix)
    raw = yaml.safe_load(TINY.read_text())
    raw["run"].update(backend="local", prompts_per_step=PROMPTS)
    raw["checkpoint"] = {"every": 0, "keep_last": 1}  # only at the end: never reached
    raw["eval"] = {"every": 0}
    raw["log"] = {"loggers": ["tensorboard"], "rollouts_every": 1}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    mnt, copy = tmp_path / "mnt", tmp_path / "copy"
    train = (f"{sys.executable} -c 'import sys; from trainer_client.cli import train_main; "
             f"sys.exit(train_main())' --config {cfg} --output-dir {mnt}/run --reward-url "
             f"{reward_url} --max-steps 1000 --no-progress > {tmp_path}/log 2>&1; "
             f"echo $? > {tmp_path}/rc; cp -a {mnt}/run {copy}")
    r = run_on_tmpfs(prefix, mnt, "700k", train, timeout_s=600, env={"PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    log = (tmp_path / "log").read_text()
    assert (tmp_path / "rc").read_text().strip() == "1", log[-3000:]
    assert "grpo-train: stopped: disk full writing " in log, log[-3000:]
    assert "No space left on device" in log and "no checkpoint was saved" in log
    assert "Traceback" not in log, log[-3000:]
    rows = [json.loads(x) for x in (copy / "metrics.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) < 1000 and [r["step"] for r in rows] == list(
        range(1, len(rows) + 1))
    for f in (copy / "rollouts").glob("step_*.jsonl"):  # whole files of whole lines
        assert len(_lines(f)) == PROMPTS * N
    assert not list(copy.rglob("*.tmp"))
    shutil.rmtree(copy)
    print(f"full disk after {len(rows)} steps: "
          + next(x for x in log.splitlines() if x.startswith("grpo-train: stopped")))
