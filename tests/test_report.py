"""python -m rlinf_eks report: logs written by the real writers (tests/report_logs.py) read back,
drawn, and checked by the data the figures plot; the command's exit statuses; --from-bucket
against a stubbed S3 client; one golden report per dialect."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("tensorboard")
pytest.importorskip("tensorboardX")

from rlinf_eks.__main__ import main  # noqa: E402
from rlinf_eks.report import make_report  # noqa: E402
from rlinf_eks.report.logs import STEP_TIME_FROM_LOG, read_logs  # noqa: E402
from tests import report_logs  # noqa: E402

SNAPSHOTS = Path(__file__).parent / "snapshots" / "report"


def page_data(out: Path) -> dict:
    """The data the page embeds (what its figures plot)."""
    text = (out / "index.html").read_text()
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    assert match, "the page embeds no report data"
    return json.loads(match.group(1).replace("<\\/", "</"))


def lines_of(data: dict, figure: str) -> dict[str, tuple[list, list]]:
    (fig,) = [f for f in data["figures"] if f["name"] == figure]
    return {line["label"]: (line["x"], line["y"]) for line in fig["lines"]}


def test_rlinf_tensorboard_events_are_read_as_written(tmp_path):
    run = report_logs.rlinf_run(tmp_path / "run", steps=7)
    logs = read_logs(run)
    assert logs.formats == {"tensorboard"}
    assert logs.series["env/success_once"].steps == list(range(7))
    assert logs.series["env/success_once"].values == pytest.approx([report_logs.rlinf_success(s) for s in range(7)])
    assert "eval/success_once" not in logs.series  # evaluations are read on their own


def test_verl_console_log_lines_and_step_time_from_their_timestamps(tmp_path):
    run = report_logs.verl_run(tmp_path / "run", steps=5, partial_last_line=True)
    logs = read_logs(run)
    assert logs.formats == {"verl-console"}
    assert logs.skipped_lines == 1  # the line being written
    assert logs.series["val/test_score/all"].points == pytest.approx({0: 0.4, 3: report_logs.verl_success(3) + 0.02})
    # training lines 300 s apart, +10 s on odd steps
    assert logs.series[STEP_TIME_FROM_LOG].points == pytest.approx({1: 310.0, 2: 290.0, 3: 310.0, 4: 290.0})


def test_the_page_plots_the_logged_curves_and_the_summary_finds_the_best_step(tmp_path):
    run = report_logs.rlinf_run(tmp_path / "run", steps=160)
    result = make_report(run, tmp_path / "out", title="t")
    assert result.status == 0
    data = page_data(tmp_path / "out")
    x, y = lines_of(data, "success")["env/success_once"]
    assert x == list(range(160)) and y == pytest.approx([report_logs.rlinf_success(s) for s in range(160)])
    x, y = lines_of(data, "loss")["train/actor/policy_loss"]
    assert y == pytest.approx([report_logs.rlinf_policy_loss(s) for s in range(160)])
    assert lines_of(data, "step_time")["time/step"][1] == pytest.approx([report_logs.rlinf_step_time(s) for s in range(160)])
    values = [report_logs.rlinf_success(s) for s in range(160)]
    best = max(values)
    # TensorBoard stores float32: the summary prints what was read, to three places
    assert f"best success rate: {best:.3f} (env/success_once) at step {values.index(best)}" in result.summary
    import statistics

    times = [report_logs.rlinf_step_time(s) for s in range(160)]
    assert "step reached: 159" in result.summary
    assert f"time per step: median {statistics.median(times):.1f} s, last {times[-1]:.1f} s (time/step)" in result.summary
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == data
    # the PNG and SVG files are the figures the page shows
    for figure in data["figures"]:
        assert (tmp_path / "out" / figure["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (tmp_path / "out" / figure["svg"]).read_text()


def test_evaluations_show_their_metrics_and_link_their_videos(tmp_path):
    run = report_logs.rlinf_run(tmp_path / "run", steps=3)
    make_report(run, tmp_path / "out", title="t")
    data = page_data(tmp_path / "out")
    by_name = {e["name"]: e for e in data["evaluations"]}
    assert list(by_name) == ["step-5", "step-10"]
    assert by_name["step-10"]["metrics"] == {"eval/return": 3.5, "eval/success_once": 0.875}
    assert by_name["step-10"]["status"] == 0
    # an evaluation still running: its own events, no summary yet
    assert by_name["step-5"]["metrics"] == {"eval/success_once": 0.5} and by_name["step-5"]["status"] is None
    for video in by_name["step-10"]["videos"]:
        assert (tmp_path / "out" / video).is_file(), video
    assert len(by_name["step-10"]["videos"]) == 2


def test_unknown_metrics_are_listed_not_drawn(tmp_path):
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run" / "logs" / "tensorboard"))
    for step in range(3):
        writer.add_scalar("custom/my_counter", float(step * 2), step)
    writer.close()
    result = make_report(tmp_path / "run", tmp_path / "out", title="t")
    data = page_data(tmp_path / "out")
    assert data["figures"] == []
    assert data["other"] == [{"tag": "custom/my_counter", "last_step": 2, "last_value": 4.0}]
    assert result.status == 0 and "best success rate: none logged" in result.summary


def test_log_files_without_a_readable_step_are_named_not_denied(tmp_path, capsys):
    """A truncated or foreign events file and a run_*.log of no complete line: the report says it
    found them and read no step, not that there are no logs."""
    events = tmp_path / "run" / "logs" / "tensorboard"
    events.mkdir(parents=True)
    (events / "events.out.tfevents.1.host").write_bytes(b"not a TFRecord")
    (tmp_path / "run" / "checkpoints").mkdir()
    (tmp_path / "run" / "checkpoints" / "run_1.log").write_text("2026-12-01T00:00:00\tnot a step\n")
    assert main(["report", "single-node", "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "o")]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first == ("no metrics logged yet: 2 log files (checkpoints/run_1.log, logs/tensorboard/events.out.tfevents.1.host) without a "
                     "complete step: a run that just started writes its first step soon; a file that stays so is truncated or not a log of this kind")


def test_report_command_exit_statuses(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "single-node", "--run-dir", str(empty), "--out", str(tmp_path / "o1")]) == 1
    out = capsys.readouterr().out
    assert "no metrics logged yet" in out and (tmp_path / "o1" / "index.html").is_file()
    assert main(["report", "single-node", "--run-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert f"--run-dir {tmp_path / 'missing'}: no such folder" in err and "--from-bucket" in err
    assert main(["report", "no-such-stack", "--run-dir", str(empty)]) == 2
    assert "no-such-stack" in capsys.readouterr().err
    # without the shared filesystem mounted here, the default run directory is not found
    assert main(["report", "multi-node", "--out", str(tmp_path / "o3")]) == 2
    assert "/fsx/multi-node: no such folder here" in capsys.readouterr().err
    run = report_logs.verl_run(tmp_path / "run")
    assert main(["report", "single-node", "--run-dir", str(run), "--out", str(tmp_path / "o4")]) == 0
    assert "best success rate: 0.770 (val/test_score/all) at step 7" in capsys.readouterr().out


def test_report_without_the_extra_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["report", "single-node", "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err and "pip install 'rlinf-eks[report]'" in err


def test_from_bucket_copies_only_the_logs_of_the_run_prefix(tmp_path, capsys, monkeypatch):
    boto3 = pytest.importorskip("boto3")
    from botocore.response import StreamingBody
    from botocore.stub import Stubber

    source = report_logs.verl_run(tmp_path / "source")
    log_key = "single-node/checkpoints/run_20261102_080000.log"
    body = (source / "checkpoints" / "run_20261102_080000.log").read_bytes()
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": log_key}, {"Key": "single-node/checkpoints/actor/global_step_24/model.safetensors"}], "IsTruncated": False},
        {"Bucket": "my-bucket", "Prefix": "single-node/"},
    )
    stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))}, {"Bucket": "my-bucket", "Key": log_key})
    monkeypatch.setattr(boto3, "client", lambda *a, **k: client)
    with stub:
        status = main(["report", "single-node", "--from-bucket", "--bucket", "my-bucket", "--out", str(tmp_path / "out")])
        stub.assert_no_pending_responses()  # the weights were never fetched
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "run" / "checkpoints" / "run_20261102_080000.log").read_bytes() == body
    assert not (tmp_path / "out" / "run" / "checkpoints" / "actor").exists()
    assert lines_of(page_data(tmp_path / "out"), "success")["val/test_score/all"][0] == [0, 3, 7]


def test_from_bucket_errors_are_one_line_and_status_2(tmp_path, capsys, monkeypatch):
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_client_error("list_objects_v2", "NoSuchBucket", "The specified bucket does not exist", 404)
    stub.add_response("list_objects_v2", {"IsTruncated": False}, {"Bucket": "b", "Prefix": "single-node/"})
    monkeypatch.setattr(boto3, "client", lambda *a, **k: client)
    with stub:
        assert main(["report", "single-node", "--from-bucket", "--bucket", "b", "--out", str(tmp_path / "o")]) == 2
        assert "NoSuchBucket" in capsys.readouterr().err
        assert main(["report", "single-node", "--from-bucket", "--bucket", "b", "--out", str(tmp_path / "o")]) == 2
        assert "holds no objects" in capsys.readouterr().err
    assert main(["report", "single-node", "--from-bucket", "--out", str(tmp_path / "o")]) == 2
    assert "checkpointBucket" in capsys.readouterr().err


@pytest.mark.parametrize("dialect", ["rlinf-embodied", "verl-ppo"])
def test_golden_report(tmp_path, dialect):
    run = report_logs.rlinf_run(tmp_path / "run") if dialect == "rlinf-embodied" else report_logs.verl_run(tmp_path / "run")
    result = make_report(run, tmp_path / "out", title=dialect, backend="prometheus")
    data = page_data(tmp_path / "out")
    data["figures"] = [{k: v for k, v in f.items()} for f in data["figures"]]
    golden = SNAPSHOTS / f"{dialect}.json"
    if os.environ.get("RLINF_EKS_UPDATE_SNAPSHOTS"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert data == json.loads(golden.read_text()), f"the {dialect} report changed: RLINF_EKS_UPDATE_SNAPSHOTS=1 re-records it"
    assert result.summary.splitlines() == data["summary"]


def test_a_run_in_progress_with_a_record_being_written_reads_the_complete_ones(tmp_path):
    run = report_logs.rlinf_run(tmp_path / "run", steps=5, evaluations=False)
    (events,) = (run / "logs" / "tensorboard").glob("events.out.tfevents.*")
    data = events.read_bytes()
    events.write_bytes(data[:-7])  # the last record cut off mid-write
    logs = read_logs(run)
    assert logs.series["env/success_once"].steps == list(range(5))
    assert logs.series["time/generate_rollouts"].steps == [0, 1, 2, 3]  # its step-4 record was the cut one


def test_the_report_folders_own_names_are_what_the_report_writes():
    """``report --out`` takes a folder with files only when it holds one of these (REPORT_OUTPUTS,
    spelt out in the CLI so that it imports no drawing code): the names the report writes."""
    from rlinf_eks.report.cli import REPORT_OUTPUTS
    from rlinf_eks.report.figures import FIGURES_DIR
    from rlinf_eks.report.page import DATA, PAGE

    assert {PAGE, DATA, FIGURES_DIR} <= set(REPORT_OUTPUTS)


def test_the_launcher_s_hidden_folder_of_the_eval_directory_is_no_evaluation(tmp_path, capsys):
    """The evaluation pod's launcher keeps its records in eval/.rlinf-eks (the GPU proof's report
    listed it as "evaluation .rlinf-eks: no metrics yet"): report skips hidden folders there."""
    from rlinf_eks.report.logs import read_run

    run = report_logs.rlinf_run(tmp_path / "run", steps=3)
    (run / "eval" / ".rlinf-eks").mkdir()
    (run / "eval" / ".rlinf-eks" / "run-identity").write_text("x\n")
    assert [e.name for e in read_run(run).evaluations] == ["step-5", "step-10"]
    result = make_report(run, tmp_path / "out", title="t")
    assert [e["name"] for e in page_data(tmp_path / "out")["evaluations"]] == ["step-5", "step-10"]
    assert "evaluation step-10:" in result.summary and ".rlinf-eks" not in result.summary


def test_an_evaluation_of_a_verl_attempts_checkpoint_keeps_its_step(tmp_path):
    from rlinf_eks.report.logs import read_run

    for name, step in (("step-25", 25), ("attempt-2-step-25", 25)):
        folder = tmp_path / "eval" / name
        folder.mkdir(parents=True)
        (folder / "eval.json").write_text(json.dumps({"checkpoint": f"/run/checkpoints/x/global_step_{step}", "step": step, "status": 0, "metrics": {}}))
    assert [(e.name, e.step) for e in read_run(tmp_path).evaluations] == [("step-25", 25), ("attempt-2-step-25", 25)]
