"""Optional cross-check: run Megatron-LM's own argument parser and validator on exported scripts.

Source: benchmarks/data/launch_formats.md, section "Megatron-LM", last paragraph: megatron-core 0.19.2
needs Python >= 3.12, but its wheel can be downloaded (`pip download --no-deps --only-binary=:all:
--python-version 3.12 megatron-core==0.19.2`) and `megatron.training.arguments.parse_args/validate_args`
run on CPU with small shims: typing.override from typing_extensions, stubs for the modules that import
triton at top level, and a pretend Hopper GPU with Transformer Engine. Needs torch importable.

    python benchmarks/megatron_crosscheck.py [--wheel-dir DIR] [--keep DIR]

Prints a table: export -> accepted / rejected (+ Megatron's message). Exit 0 when every export is
accepted, 1 when one is rejected, 2 when the check itself could not run (the reason is printed).
Each export is checked in a fresh process (Megatron keeps global state): `check` starts an
interpreter per job, `check_many` imports Megatron once and forks a child per job.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WHEEL = "megatron-core==0.19.2"

SETUP = r'''
import importlib.abc, importlib.machinery, json, os, sys, types, typing
import typing_extensions
typing.override = getattr(typing, "override", typing_extensions.override)   # Python 3.11


class _Dummy:
    def __init__(self, name): self._name = name
    def __call__(self, *a, **k): return a[0] if len(a) == 1 and callable(a[0]) and not k else self
    def __getattr__(self, item):
        if item.startswith("__"): raise AttributeError(item)
        return _Dummy(self._name + "." + item)


class _Stub(types.ModuleType):
    def __getattr__(self, item):
        if item.startswith("__"): raise AttributeError(item)
        return _Dummy(self.__name__ + "." + item)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Replace the megatron modules that import triton at top level by inert stubs."""
    def __init__(self, names): self.names = names
    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name in self.names else None
    def create_module(self, spec): return _Stub(spec.name)
    def exec_module(self, module): pass


def _setup(job):
    """Import Megatron's argument module from the unpacked wheel, with the shims above; return it."""
    sys.path.insert(0, job["site"])
    sys.meta_path.insert(0, _Finder(set(job["stubs"])))
    import megatron.training.arguments as A
    A.get_device_arch_version = lambda: 9          # pretend Hopper
    import torch
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)   # validate_args asks it for --moe-grouped-gemm
    A.is_te_min_version = lambda *a, **k: True      # pretend Transformer Engine is installed
    import megatron.core.transformer.transformer_config as TC
    import megatron.core.models.common.embeddings.rope_utils as R
    TC.is_te_min_version = A.is_te_min_version
    R.fused_apply_rotary_pos_emb = R.fused_apply_rotary_pos_emb or (lambda *a, **k: None)  # TE's fused RoPE
    import megatron.core.transformer.moe.moe_utils as MU                    # TE's fused MoE permutes
    for name in ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                 "fused_sort_chunks_by_index_with_probs", "fused_unpermute"):
        setattr(MU, name, getattr(MU, name, None) or (lambda *a, **k: None))
    return A


def _run(A, job):
    """Megatron's parse_args, validate_args and TransformerConfig on the job's argv: {"ok", "why"}."""
    sys.argv = ["pretrain_gpt.py"] + job["argv"]
    try:
        args = A.parse_args()
        A.validate_args(args)
        A.core_transformer_config_from_args(args)   # TransformerConfig checks uneven stages and layouts
    except SystemExit as err:
        return {"ok": False, "why": f"argparse exit {err.code}"}
    except (AssertionError, ValueError, TypeError, KeyError, RuntimeError) as err:
        return {"ok": False, "why": f"{type(err).__name__}: {err}"}
    kept = {k: getattr(args, k, None) for k in ARG_FIELDS}
    if args.tokenizer_type == "NullTokenizer" and args.vocab_size:  # what build_tokenizer pads it to
        from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding
        kept["padded_vocab_size"] = vocab_size_with_padding(args.vocab_size, args, logging_enabled=False)
    return {"ok": True, "why": f"dp={args.data_parallel_size} vpp={args.virtual_pipeline_model_parallel_size}",
            "args": {k: v if v is None or isinstance(v, (bool, int, float, str)) else str(v) for k, v in kept.items()}}


# what Megatron derived from the argv, returned beside the verdict (tests/test_megatron_reader_vs_megatron.py)
ARG_FIELDS = ["num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
              "group_query_attention", "kv_channels", "seq_length", "num_experts", "moe_ffn_hidden_size",
              "moe_router_topk", "tensor_model_parallel_size", "pipeline_model_parallel_size",
              "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
              "virtual_pipeline_model_parallel_size", "sequence_parallel", "micro_batch_size", "global_batch_size",
              "data_parallel_size", "moe_token_dispatcher_type", "moe_permute_fusion", "moe_grouped_gemm",
              "accumulate_allreduce_grads_in_fp32", "use_distributed_optimizer", "overlap_grad_reduce",
              "overlap_param_gather", "recompute_granularity", "recompute_method", "recompute_num_layers",
              "swiglu", "bf16", "fp16", "transformer_impl", "use_torch_fsdp2", "use_megatron_fsdp"]
'''

ONE = SETUP + r'''
job = json.loads(sys.argv[1])
os.environ.update(job["env"])
print(json.dumps(_run(_setup(job), job)))
'''

# Many jobs in one interpreter: Megatron (and torch) imported once, then each job in a forked child, which
# starts from the freshly imported state (Megatron keeps global state, so jobs never share a process).
# The job's environment is set in the child, after the import (ONE sets it before).
MANY = SETUP + r'''
jobs = json.loads(sys.stdin.read())
A = _setup(jobs[0])
for i, job in enumerate(jobs):
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.environ.update(job["env"])
            result = _run(A, job)
        except BaseException as err:
            result = {"ok": False, "why": f"crashed: {type(err).__name__}: {err}"}
        print(json.dumps({"index": i, **result}))
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
'''


def fetch_wheel(wheel_dir: Path) -> Path:
    wheels = sorted(wheel_dir.glob("megatron_core-0.19.2-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
               "3.12", WHEEL, "-d", str(wheel_dir)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"pip download failed: {run.stderr.strip()[-500:]}")
        wheels = sorted(wheel_dir.glob("megatron_core-0.19.2-*.whl"))
    if not wheels:
        raise RuntimeError(f"no megatron_core 0.19.2 wheel in {wheel_dir}")
    return wheels[0]


def unpack(wheel: Path, site: Path) -> list[str]:
    """Extract the wheel; return the modules that import triton at top level (to be stubbed)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    stubs = []
    for path in (site / "megatron").rglob("*.py"):
        if re.search(r"^(import triton|from triton)", path.read_text(errors="replace"), re.M):
            stubs.append(".".join(path.relative_to(site).with_suffix("").parts))
    return stubs


def exports(out: Path) -> list[tuple[str, Path, int]]:
    """(case, Megatron script, world size) for every test case of tests/test_exporters.py."""
    from planner.exporters import export
    from tests.test_exporters import CASES
    found = []
    for case, build in CASES.items():
        doc = build()
        for fmt, name in (("megatron", "launch_megatron.sh"), ("slurm", "launch_slurm.sbatch")):
            if fmt == "slurm" and "example" not in case:
                continue
            path = export(doc, fmt, out / f"{case}-{fmt}", force=True)[0]
            world = doc["cluster"]["num_nodes"] * doc["cluster"]["gpus_per_node"]
            found.append((f"{case} ({fmt})", path, world))
    return found


LISTS = {"--recompute-modules", "--cuda-graph-scope", "--offload-modules", "--moe-aux-loss-coeff",
         "--hierarchical-context-parallel-sizes"}  # nargs "+": the reader keeps their words as one value


def job_for(path: Path, world: int, site: Path, stubs: list[str]) -> dict:
    from planner.frameworks.megatron.flags import read_megatron
    text = path.read_text()
    if path.suffix == ".sbatch":
        text = f"SLURM_NNODES={world // 8}\nSLURM_JOB_ID=1\n" + text
    args = read_megatron(text)
    argv = [w for flag, value in args.pairs for w in ([flag] if value is None else
                                                     [flag, *(value.split() if flag in LISTS else [value])])]
    env = {"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0", **args.env}
    return {"site": str(site), "stubs": stubs, "argv": argv, "env": env}


CONTROLS = [  # deliberately broken variants: Megatron must reject each (shows the check has teeth)
    ("control: FSDP with CUDA_DEVICE_MAX_CONNECTIONS=1", "llama3-70b-example (megatron)",
     lambda j: j["env"].update(CUDA_DEVICE_MAX_CONNECTIONS="1")),
    ("control: 3 layers per virtual stage", "8b-tp2-interleaved (megatron)",
     lambda j: j.update(argv=[("3" if a == "4" and j["argv"][i - 1] == "--num-layers-per-virtual-pipeline-stage"
                               else a) for i, a in enumerate(j["argv"])])),
    ("control: misspelled flag", "8b-zero3-dp8 (megatron)",
     lambda j: j.update(argv=["--tensor-parallel-size" if a == "--tensor-model-parallel-size" else a
                              for a in j["argv"]])),
    ("control: uneven ends that do not add up", "8b-uneven-ends (megatron)",
     lambda j: j.update(argv=[("6" if a == "7" and j["argv"][i - 1] == "--decoder-first-pipeline-num-layers"
                               else a) for i, a in enumerate(j["argv"])])),
]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}


def check(job: dict) -> tuple[bool, str]:
    """One job in a fresh interpreter: (accepted, Megatron's message or the dp/vpp it derived)."""
    run = subprocess.run([sys.executable, "-c", ONE, json.dumps(job)], capture_output=True, text=True, env=_env(),
                         timeout=300)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return False, "crashed: " + (run.stderr.strip().splitlines() or ["no output"])[-1]
    result = json.loads(lines[-1])
    return result["ok"], result["why"]


def check_many(jobs: list[dict]) -> list[tuple[bool, str]]:
    """Every job in one interpreter that imports Megatron once and forks a child per job (Linux; elsewhere
    `check` per job): the verdicts of `check`, in order, for the import cost of one (jobs must share the
    site and stubs)."""
    if not sys.platform.startswith("linux"):  # forking after torch's import is not safe everywhere (macOS)
        return [check(job) for job in jobs]
    return [(r["ok"], r["why"]) for r in results_many(jobs)]


def results_many(jobs: list[dict]) -> list[dict]:
    """check_many's results whole, in order (Linux): {"ok", "why"} and, when accepted, "args", the values of
    ARG_FIELDS that Megatron's parse_args and validate_args derived."""
    if not jobs:
        return []
    run = subprocess.run([sys.executable, "-c", MANY], input=json.dumps(jobs), capture_output=True, text=True,
                         env=_env(), timeout=300 + 60 * len(jobs))
    found = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            found[result["index"]] = result
    last = (run.stderr.strip().splitlines() or ["no output"])[-1]
    return [found.get(i, {"ok": False, "why": f"crashed: {last}"}) for i in range(len(jobs))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel-dir", type=Path, default=None, help="folder holding (or receiving) the wheel")
    ap.add_argument("--keep", type=Path, default=None, help="keep the exported scripts here")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        try:
            wheel = fetch_wheel(opts.wheel_dir or tmp)
            stubs = unpack(wheel, tmp / "site")
            cases = exports(opts.keep or tmp / "exports")
        except Exception as err:  # report why the check could not run
            print(f"megatron cross-check could not run: {type(err).__name__}: {err}")
            return 2
        print(f"megatron-core wheel: {wheel.name}; {len(stubs)} triton modules stubbed; Python {sys.version.split()[0]}")
        print(f"{'export':40} {'result':9} detail")
        jobs = {case: job_for(path, world, tmp / "site", stubs) for case, path, world in cases}
        controls = []
        for label, base, mutate in CONTROLS:
            job = json.loads(json.dumps(jobs[base]))
            mutate(job)
            controls.append(job)
        verdicts = check_many([*jobs.values(), *controls])
        failures = 0
        for case, (ok, why) in zip(jobs, verdicts):
            failures += not ok
            print(f"{case:40} {'accepted' if ok else 'REJECTED':9} {why}")
        print(f"{len(cases) - failures} accepted, {failures} rejected")
        missed = 0
        for (label, _, _), (ok, why) in zip(CONTROLS, verdicts[len(jobs):]):
            missed += ok
            print(f"{label:40} {'accepted' if ok else 'rejected':9} {why[:150]}")
        print(f"controls: {len(CONTROLS) - missed} of {len(CONTROLS)} rejected as expected")
        return 1 if failures or missed else 0


if __name__ == "__main__":
    sys.exit(main())
