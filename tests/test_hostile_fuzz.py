"""Fuzz every file reader with hypothesis-generated JSON, YAML and TOML of random shape: model and
cluster specs, plan files, stack files (--stack-file), Hugging Face config.json, DeepSpeed JSON and
torchtitan TOML (both through `check`). Whatever the content, parplan answers 0, 1 or 2: never 3 (an
internal error), never a traceback (a run that hangs is stopped by test_hostile_inputs' guard). The documents are valid ones with random
keys replaced, added or nested deeply, so that the readers get past their first check.

Bounded for CI: a few examples per reader, no per-example deadline and no clock asserted (issue 36).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_hostile_inputs import DS, HF, MODEL, PLAN, assert_clean, invoke

EXAMPLES = int(os.environ.get("PARPLAN_FUZZ_EXAMPLES", "12"))  # more for a local bug hunt
CLUSTER = {"name": "c", "gpu": "h100-sxm", "gpus_per_node": 8, "num_nodes": 1, "scale_up_gb_per_s": 450.0,
           "scale_out_gb_per_s": 50.0, "memory_reserve_gib": 1.0}
STACK = {"name": "s", "framework": "megatron", "grad_bucket_mparams": 40.0, "attn_scale": 1.0,
         "held_out": {"*": {"rows": 1, "mean": 0.1, "p50": 0.1, "p90": 0.2, "bias": 0.0}}}
TITAN = {"parallelism": {"tensor_parallel_degree": 8, "data_parallel_shard_degree": 1, "pipeline_parallel_degree": 1,
                         "pipeline_parallel_schedule": "1F1B", "pipeline_parallel_first_stage_less_layers": 1},
         "training": {"local_batch_size": 1, "seq_len": 2048}, "activation_checkpoint": {"mode": "selective"}}
BASE_ARGS = ["--cluster", "dgx-h100", "--layout", "tp=8", "--global-batch", "8"]

# reader: (base document, file name, argv with {f} for the file)
READERS = {
    "model-json": (MODEL, "m.json", ["estimate", "{f}", *BASE_ARGS]),
    "model-yaml": (MODEL, "m.yaml", ["estimate", "{f}", *BASE_ARGS]),
    "cluster-yaml": (CLUSTER, "c.yaml", ["estimate", "llama3-8b", "--cluster", "{f}", "--layout", "tp=8",
                                         "--global-batch", "8"]),
    "plan-json": (PLAN, "p.json", ["check", "{f}"]),
    "plan-report": (PLAN, "p.yaml", ["report", "{f}"]),
    "stack-file": (STACK, "s.yaml", ["estimate", "llama3-8b", *BASE_ARGS, "--stack-file", "{f}"]),
    "hf-config": (HF, "config.json", ["estimate", "{f}", *BASE_ARGS]),
    "deepspeed": (DS, "ds.json", ["check", "{f}", "--model", "llama3-8b", "--cluster", "dgx-h100"]),
    "torchtitan": (TITAN, "t.toml", ["check", "{f}", "--model", "llama3-8b", "--cluster", "dgx-h100"]),
}

scalars = (st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.integers(-(10**40), 10**40)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["true", "false", "auto", "1F1B", "h100-sxm", "dgx-h100", "llama3-8b", "-1", "0"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def deep(draw):
    """A value nested 1 to 200 levels deep in lists or mappings."""
    value = draw(scalars)
    for _ in range(draw(st.integers(1, 200))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


@st.composite
def documents(draw, base: dict):
    """`base` with some keys (its own, nested ones, or new) given random values, some deleted."""
    doc = json.loads(json.dumps(base))
    keys = list(doc) + [draw(st.text(min_size=1, max_size=8))]
    for key in draw(st.lists(st.sampled_from(keys), max_size=4, unique=True)):
        target = doc
        if isinstance(doc.get(key), dict) and doc[key] and draw(st.booleans()):
            target, key = doc[key], draw(st.sampled_from(sorted(doc[key])))
        action = draw(st.sampled_from(["value", "value", "deep", "delete"]))
        if action == "delete":
            target.pop(key, None)
        else:
            target[key] = draw(deep() if action == "deep" else values)
    return doc


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if not (isinstance(value, float) and math.isnan(value)) else "nan"
    if isinstance(value, str) or value is None:
        return json.dumps(value or "")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def to_toml(doc: dict) -> str:
    """A small TOML writer: top-level scalars, then one [table] per mapping (deeper ones inline)."""
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for name, table in ((k, v) for k, v in doc.items() if isinstance(v, dict)):
        lines += [f"[{json.dumps(name)}]"] + [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _text(name: str, doc: dict) -> str:
    if name.endswith(".toml"):
        return to_toml(doc)
    if name.endswith(".json"):
        return json.dumps(doc)
    return yaml.safe_dump(doc, allow_unicode=True)


@pytest.mark.parametrize("reader", READERS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("PARPLAN_FUZZ_RANDOM") is None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_document_exits_0_1_or_2(reader: str, data):
    base, name, argv = READERS[reader]
    doc = data.draw(documents(base), label="document")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(_text(name, doc), encoding="utf-8", errors="surrogatepass")
        result, _ = invoke([a.replace("{f}", str(path)) for a in argv])
    assert_clean(result, None, {0, 1, 2}, [])
