"""Turn benchmarks/gpu/measure_moe.py's (and measure_moe_fp8.py's) JSON list into a CSV with named columns
(benchmarks/data/measured/gpu_moe_h100.csv, gpu_moe_fp8_h100.csv).

    python3 benchmarks/gpu/moe_json_to_csv.py moe.json benchmarks/data/measured/gpu_moe_h100.csv
"""
import csv
import json
import sys

NAMES = {"gf": "grouped_fwd", "gd": "grouped_dgrad", "gw": "grouped_wgrad", "lf": "loop_fwd", "df": "dense_fwd",
         "sg": "grouped_fwd_fp8", "sd": "dense_fwd_fp8", "perm": "permute", "unperm": "unpermute", "router": "router", "gluc": "glu_clamped", "glup": "glu_plain"}
MODELS = {"q": "qwen3-30b-a3b", "o": "gpt-oss-120b", "d": "deepseek-v3"}
FIELDS = ["kind", "model", "groups", "tokens", "k", "n", "median_ms", "tflops", "gb_per_s"]


def row(r: list) -> dict:
    """One named row: groups = experts (GEMMs) or top-k (permute); tokens = per expert (GEMMs) or T."""
    if r[0] in ("launch_us", "sync_ms"):
        return dict(kind={"launch_us": "host_launch_us", "sync_ms": "host_sync"}[r[0]], median_ms=r[1])
    out = dict(kind=NAMES[r[0]], model=MODELS[r[1]], groups=r[2], tokens=r[3], median_ms=r[6])
    if r[0] in ("gf", "gd", "gw", "lf", "df", "sg", "sd"):
        out.update(k=r[4], n=r[5], tflops=r[7])
    elif r[0] in ("perm", "unperm"):
        out.update(k=r[4], gb_per_s=r[7])
    elif r[0] == "router":
        out.update(k=r[4], n=r[5])
    else:
        out.update(n=r[4])
    return out


def main() -> None:
    rows = [row(r) for r in json.load(open(sys.argv[1]))]
    with open(sys.argv[2], "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
