"""Log formats a report-only pass wrote the way each framework prints them (2026-11-27), misread before:
- a batch ramp-up (--rampup-batch-size): every line prints its step's batch, and the small-batch steps were
  fitted at the run's batch (8x short);
- Megatron-DeepSpeed prints DeepSpeed's ThroughputTimer line before its own iteration line, and was read as a
  DeepSpeed run with its argument dump unread;
- pdsh's `host: ` and OpenMPI's `[job,rank]<stdout>:` prefixes hid the argument dump (tp/pp/mbs taken as 1);
- a log cut off inside the last line read `(ms): 1` as a 1 ms step;
- `recompute_granularity .... None` was "not stated"."""

from __future__ import annotations

import re

from log_render import megatron_log

from planner.files.logs import detect, read_log

SHAPE = dict(layers=24, hidden=2304, heads=24, seq=2048)


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_batch_ramp_up_fits_only_the_lines_at_the_runs_batch(tmp_path):
    text = megatron_log(tp=2, pp=1, dp=4, mbs=4, gbs=512, step_ms=9800.0, iters=30, **SHAPE)
    lines = text.splitlines()
    steps = [i for i, line in enumerate(lines) if "elapsed time per iteration" in line]
    for i in steps[:10]:  # the first ten steps at 64 sequences, an eighth of the time
        lines[i] = re.sub(r"global batch size:\s+512", "global batch size:    64", lines[i])
        lines[i] = re.sub(r"\(ms\): ([0-9.]+)", lambda m: f"(ms): {float(m.group(1)) / 8:.1f}", lines[i])
    log = read_log(_write(tmp_path, "ramp.log", "\n".join(lines) + "\n"))
    assert len(log.steps) == 20 and log.settings["global_batch"] == 512
    assert all(s.seconds > 9.0 for s in log.steps[1:])
    assert any(n.startswith("skipped:") and "10 step line(s)" in n for n in log.notes)


def test_megatron_deepspeed_is_read_as_megatron(tmp_path):
    text = megatron_log(tp=4, pp=1, dp=4, mbs=4, gbs=64, step_ms=8200.0, iters=12, **SHAPE)
    timer = "[2024-01-01 00:00:00,000] [INFO] [timer.py:260:stop] epoch=0/micro_step=1/global_step=1, " \
            "RunningAvgSamplesPerSec=7.8, CurrSamplesPerSec=7.8, MemAllocated=10.1GB, MaxMemAllocated=20.3GB"
    mixed = "\n".join(f"{timer}\n{line}" if "elapsed time per iteration" in line else line
                      for line in text.splitlines())
    path = _write(tmp_path, "mds.log", mixed + "\n")
    log = read_log(path)
    assert detect(path) == "megatron" and log.settings["tp"] == 4 and log.settings["world_size"] == 16


def test_pdsh_and_openmpi_prefixes_keep_the_argument_dump(tmp_path):
    text = megatron_log(tp=2, pp=2, dp=8, mbs=4, gbs=512, step_ms=9800.0, iters=12, **SHAPE)
    for prefix in ("node-001: ", "[1,0]<stdout>:"):
        log = read_log(_write(tmp_path, "p.log", "\n".join(prefix + line for line in text.splitlines()) + "\n"))
        assert (log.settings["tp"], log.settings["pp"], log.settings["mbs"]) == (2, 2, 4), prefix
        assert len(log.steps) == 12


def test_a_line_cut_inside_its_time_is_no_step(tmp_path):
    text = megatron_log(tp=8, pp=1, dp=1, mbs=1, gbs=64, step_ms=13000.0, iters=12, **SHAPE)
    last = text.rstrip("\n").splitlines()[-1]
    cut = text.rstrip("\n")[: len(text.rstrip("\n")) - len(last)] + last.split("(ms): ")[0] + "(ms): 1"
    log = read_log(_write(tmp_path, "cut.log", cut))
    assert len(log.steps) == 11 and min(s.seconds for s in log.steps) > 1.0


def test_a_dump_stating_no_recompute_is_read_as_none(tmp_path):
    text = megatron_log(tp=8, pp=1, dp=1, mbs=1, gbs=64, step_ms=13000.0, iters=6, **SHAPE,
                        extra_args={"recompute_granularity": None})
    assert read_log(_write(tmp_path, "none.log", text)).settings["recompute"] == "none"


def test_deepspeed_0_9_timer_names_are_read(tmp_path):
    """DeepSpeed 0.9 named the wall_clock_breakdown timers forward/backward/step (0.12: fwd/bwd/step): a log with
    those lines only was refused as having no step line."""
    from log_render import deepspeed_log  # noqa: PLC0415

    new = deepspeed_log(train_batch=32, mbs=2, zero=3, samples_per_s=6.0, timers=True, step_ms=5500.0)
    new_only = "\n".join(line for line in new.splitlines() if "CurrSamplesPerSec" not in line) + "\n"
    old = new_only.replace("| fwd: ", "| forward: ").replace("| bwd: ", "| backward: ")
    assert "forward: " in old
    a, b = read_log(_write(tmp_path, "new.log", new_only)), read_log(_write(tmp_path, "old.log", old))
    assert a.framework == b.framework == "deepspeed" and [s.seconds for s in a.steps] == [s.seconds for s in b.steps]


def test_two_runs_appended_to_one_log_fit_the_last(tmp_path):
    """A restart appended to the same file with another layout: the first dump's tp 8 and both runs' step lines
    were fitted together (the slower run's times as tp 8's). Only the last run is read now, and the rest is said."""
    first = megatron_log(tp=8, pp=1, dp=1, mbs=1, gbs=64, step_ms=13100.0, iters=12, **SHAPE)
    second = megatron_log(tp=4, pp=1, dp=2, mbs=1, gbs=128, step_ms=24500.0, iters=12, seed=1, **SHAPE)
    log = read_log(_write(tmp_path, "two.log", first + second))
    assert log.settings["tp"] == 4 and log.settings["global_batch"] == 128 and len(log.steps) == 12
    assert min(s.seconds for s in log.steps) > 20.0
    assert any(n.startswith("skipped:") and "12 step line(s) of an earlier run" in n for n in log.notes)


def test_deepspeed_pipeline_engine_lines_are_read(tmp_path):
    """DeepSpeed's PipelineEngine never stops the ThroughputTimer; it prints its own "steps: N loss: L iter time (s):
    T samples/sec: S" (pipe/engine.py train_batch), and such a log was refused as having no step line. The step time
    is the iter time; a NaN loss is skipped."""
    from log_render import deepspeed_log  # noqa: PLC0415

    head = [line for line in deepspeed_log(train_batch=256, mbs=2, zero=1, samples_per_s=36.0).splitlines()
            if "CurrSamplesPerSec" not in line]
    steps = [f"steps: {10 * k} loss: {'nan' if k == 5 else '2.1234'} iter time (s): {7.1 + 0.01 * k:.3f} "
             f"samples/sec: {256 / 7.1:.3f}" for k in range(1, 11)]
    log = read_log(_write(tmp_path, "pipe.log", "\n".join(head + steps) + "\n"))
    assert log.framework == "deepspeed" and [s.step for s in log.steps] == [10 * k for k in range(1, 11)]
    assert abs(log.steps[0].seconds - 7.11) < 1e-9 and log.steps[4].bad_loss and log.settings["timer_seconds"]


def test_a_bridge_log_of_rank_0_alone_is_read_from_its_step_time_lines(tmp_path):
    """Megatron-Bridge prints "Step Time : 13.51s GPU utilization: ..." on rank 0 and the iteration line on the last
    rank: node 0's log, or one kept with --local-ranks-filter 0, has only the former, and was refused as having no
    step line. Its steps are those lines, in order, and the summary gives the layout as before."""
    from pathlib import Path  # noqa: PLC0415

    example = Path(__file__).resolve().parent.parent / "examples" / "logs" / "bridge_llama3_8b_tp4_dp2.log"
    whole = read_log(example)
    rank0 = "\n".join(line for line in example.read_text().splitlines() if "elapsed time per iteration" not in line)
    alone = read_log(_write(tmp_path, "rank0.log", rank0 + "\n"))
    assert len(alone.steps) == len(whole.steps) == 30 and alone.settings == whole.settings
    assert all(abs(a.seconds - w.seconds) < 0.006 for a, w in zip(alone.steps, whole.steps))
    assert any("rank-0 'Step Time' lines" in n for n in alone.notes)


def test_a_quantized_torchtitan_run_is_said_to_be_priced_as_bf16(tmp_path):
    """torchtitan prints 'mfu: N/A' only when a float8/MX converter is on (0.3.0 metrics.py); such a run was fitted as
    bf16 without a word. calibrate says so unless --precision is given."""
    import json  # noqa: PLC0415

    from typer.testing import CliRunner  # noqa: PLC0415

    from log_render import torchtitan_log  # noqa: PLC0415
    from planner.cli import app  # noqa: PLC0415

    text = torchtitan_log(local_batch=2, global_batch=16, seq=8192, tps=6000.0)
    quantized = _write(tmp_path, "fp8.log", re.sub(r"mfu: [0-9.]+%", "mfu: N/A", text))
    args = ["calibrate", str(quantized), "--model", "llama3-8b", "--cluster", "dgx-h100", "--json"]
    said = json.loads(CliRunner().invoke(app, args).stdout)["runs"][0]["notes"]
    assert any("prints 'mfu: N/A'" in n for n in said)
    given = json.loads(CliRunner().invoke(app, [*args, "--precision", "fp8"]).stdout)["runs"][0]["notes"]
    assert not any("mfu: N/A" in n for n in given)


def test_a_2021_megatron_dump_is_priced_from_the_2021_stack(tmp_path):
    """A dump stating checkpoint_activations (Megatron-LM before mid 2022) and nothing of flash attention was priced as
    today's Megatron Core with flash attention; megatron-2021 is the stack fitted to such runs (vTrain's A100 Megatron),
    and the choice is said. A dump that states flash attention keeps megatron-core."""
    import json  # noqa: PLC0415

    from typer.testing import CliRunner  # noqa: PLC0415

    from planner.cli import app  # noqa: PLC0415

    text = megatron_log(tp=2, pp=1, dp=4, mbs=4, gbs=64, step_ms=4000.0, iters=12, **SHAPE,
                        extra_args={"checkpoint_activations": True})
    old = "\n".join(line for line in text.splitlines() if "use_flash_attn" not in line) + "\n"
    args = ["--model", "megatron-1.7b", "--cluster", "dgx-a100", "--json"]
    said = json.loads(CliRunner().invoke(app, ["calibrate", str(_write(tmp_path, "old.log", old)), *args]).stdout)
    assert said["stack_base"] == "megatron-2021" and any("2021 Megatron-LM dump" in n for n in said["runs"][0]["notes"])
    new = json.loads(CliRunner().invoke(app, ["calibrate", str(_write(tmp_path, "new.log", text)), *args]).stdout)
    assert new["stack_base"] == "megatron-core"
