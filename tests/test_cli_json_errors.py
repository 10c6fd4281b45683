"""`--json` answers a refused input too: exit 2 with `{"error": ..., "exit_code": 2}` on stdout (the message stays
on stderr), so a CI script that parses the JSON of `check --json` gets an answer instead of an empty stdout;
without --json stdout stays empty."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()


@pytest.mark.parametrize("args,needle", [
    (["estimate", "llama3-8b", "--cluster", "no-such-cluster"], "unknown cluster preset 'no-such-cluster'"),
    (["estimate", "llama3-8b", "--cluster", "dgx-h100", "--no-such-option"], "No such option: --no-such-option"),
    (["check", "no-such-file.sh", "--cluster", "dgx-h100"], "no-such-file.sh"),
    (["plan", "no-such-model", "--cluster", "dgx-h100"], "no-such-model"),
])
def test_json_errors_are_json_on_stdout(args, needle):
    with_json = runner.invoke(app, [*args, "--json"])
    assert with_json.exit_code == 2
    answer = json.loads(with_json.stdout)
    assert answer["exit_code"] == 2 and needle in answer["error"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 2 and plain.stdout == "" and needle in plain.stderr


def test_estimate_says_the_batch_and_sequence_it_priced():
    """estimate's first line names the global batch and sequence length used (a Hugging Face config.json's own
    length, or the model preset's, were used silently before)."""
    done = runner.invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "dp=8,zero=3",
                               "--global-batch", "16", "--seq-len", "4096"])
    assert done.exit_code == 0 and "llama3-8b on 8 x h100-sxm, batch 16 x 4096, stack megatron-core" in done.stdout
