"""Fit the collective model of costmodels.comm to published nccl-tests bus bandwidths.

    python benchmarks/calibrate_nccl.py           # fit, print predicted vs published busbw per row
    python benchmarks/calibrate_nccl.py --write   # also update GPU profiles and cluster presets

Data: benchmarks/data/nccl_busbw.csv, transcribed from benchmarks/data/nccl_busbw.md; rows with
use=fit are fitted, use=check only reported (the note says why). GPU kinds: a100 (NVLink 3, HDR
IB), h100 (H100, H200 and H20 rows: NVLink 4, NDR IB), b200 (B200 and GB200 rows: NVLink 5).
Stage 1, single-node rows: nvls_speedup on the rows naming their algorithm (NVLS, Ring) at >= 4 GiB;
then eta_up, S_half_up, alpha_up and launch on all of them, with a launch offset per harness (CUDA
graphs, -g 8, torch) as nuisance parameters. A100 has no one-process-per-GPU rows: its graph offset
is H100's; B200 has no clean small-size rows: its launch, alpha_up and graph offset are H100's.
Stage 2, multi-node rows, stage 1 fixed: eta_out, S_half_out, alpha_out. Objective: least squares
of log(predicted / published time) = of the busbw ratio (scipy least_squares, BOUNDS below).
Wire rates per GPU and direction (datasheets, as the cluster presets): A100 300 / 25 GB/s,
H100-class 450 / 50, B200 900 / 50 (the B200 4x8 rows are AWS p6-b200, 8x 400G EFA); a scope
with a '/<k>nic' suffix has k NICs per node of g GPUs: k / g of a NIC per GPU (A100 3x8/4nic: 12.5 GB/s).
The shipped profiles must equal this fit: tests/test_profiles_reproducible.py refits and compares,
so a change to costmodels/comm.py or to the data needs `--write` (then benchmarks/calibrate.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodels import comm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "nccl_busbw.csv"
KIND = {"a100": "a100", "h100": "h100", "h200": "h100", "h20": "h100", "b200": "b200", "gb200": "b200"}
WIRE_GB_PER_S = {"a100": (300.0, 25.0), "h100": (450.0, 50.0), "b200": (900.0, 50.0)}
PLATEAU_BYTES = 2.0**40  # size of a "large" statement row
BOUNDS = {"eta_up": (0.5, 1.0), "half_up_mib": (0.25, 1024.0), "alpha_up_us": (0.05, 5.0),
          "launch_us": (1.0, 50.0), "nvls": (1.0, 2.0), "off_graph": (-10.0, 10.0), "off_g8": (0.0, 60.0),
          "off_torch": (0.0, 300.0), "eta_out": (0.5, 1.0), "half_out_mib": (0.25, 4096.0),
          "alpha_out_us": (0.1, 100.0)}
STAGE1 = {"a100": ["eta_up", "half_up_mib", "alpha_up_us", "launch_us", "off_g8"],
          "h100": ["eta_up", "half_up_mib", "alpha_up_us", "launch_us", "nvls", "off_graph", "off_g8", "off_torch"],
          "b200": ["eta_up", "half_up_mib", "nvls", "off_g8", "off_torch"]}
STAGE2 = ["eta_out", "half_out_mib", "alpha_out_us"]
START = {"eta_up": 0.8, "half_up_mib": 16.0, "alpha_up_us": 0.6, "launch_us": 8.0, "nvls": 1.2, "off_graph": -3.0,
         "off_g8": 20.0, "off_torch": 30.0, "eta_out": 0.9, "half_out_mib": 32.0, "alpha_out_us": 3.0}


def load_rows(path: Path = DATA) -> list[dict]:
    """The CSV rows (comment lines skipped), sizes and rates as numbers, plus the GPU kind."""
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        r["kind"] = KIND[r["gpu"]]
        r["size"] = float(r["size_bytes"]) if r["size_bytes"] else PLATEAU_BYTES
        r["time_us"] = float(r["time_us"]) if r["time_us"] else None
        r["busbw"] = float(r["busbw_gb_per_s"]) if r["busbw_gb_per_s"] else None
        rows.append(r)
    return rows


def nic_share(scope: str) -> float:
    """NICs per GPU of a scope: 1, or k / g for a node of g GPUs that names k NICs ('3x8/4nic': 0.5)."""
    if "/" not in scope:
        return 1.0
    gpus, nics = scope.split("/")[0].split("x")[1], scope.split("/")[1].removesuffix("nic")
    return int(nics) / int(gpus)


def placement(scope: str) -> tuple[int, int, int]:
    """(gpus_per_node, group size, stride) of a scope: '1x8', '2x8', 'Nx8' (taken as 4x8), 'nic'; a
    '/<k>nic' suffix names a node with k NICs (nic_share)."""
    if scope == "nic":  # one NIC's rate: a 2-rank group with one rank per node
        return 8, 2, 8
    nodes, per = scope.split("/")[0].split("x")
    nodes = 4 if nodes == "N" else int(nodes)
    return int(per), nodes * int(per), 1


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests busbw / algbw (PERFORMANCE.md)."""
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    return 1.0 if collective == "sendrecv" else (n - 1) / n


def links_for(kind: str, p: dict, gpus_per_node: int, harness: str, share: float = 1.0) -> comm.Links:
    """Links for one row: wire rates of the kind (a NIC's times the NICs per GPU), parameters p, the
    harness' launch offset."""
    up, out = WIRE_GB_PER_S[kind][0], WIRE_GB_PER_S[kind][1] * share
    offset = p.get(f"off_{harness}", 0.0)
    return comm.Links(gpus_per_node=gpus_per_node, up_bytes_per_s=p["eta_up"] * up * 1e9,
                      out_bytes_per_s=p["eta_out"] * out * 1e9, up_latency_s=p["alpha_up_us"] * 1e-6,
                      out_latency_s=p["alpha_out_us"] * 1e-6, launch_s=max(p["launch_us"] + offset, 0.0) * 1e-6,
                      up_half_bytes=p["half_up_mib"] * comm.MIB, out_half_bytes=p["half_out_mib"] * comm.MIB,
                      nvls_speedup=p["nvls"])


def predict_time_s(row: dict, p: dict) -> float:
    """Model time of one row's collective, seconds."""
    g, n, stride = placement(row["scope"])
    links, x = links_for(row["kind"], p, g, row["harness"], nic_share(row["scope"])), row["size"]
    coll, algo = row["collective"], row["algo"]
    if coll == "all_reduce":
        f = {"ring": comm.ring_all_reduce_s, "nvls": comm.nvls_all_reduce_s}.get(algo, comm.all_reduce_s)
        return f(links, n, stride, x)
    if coll == "alltoall":
        return comm.all_to_all_s(links, n, stride, x)
    if coll == "sendrecv":
        return comm.p2p_s(links, False, x)
    return comm.all_gather_s(links, n, stride, x)  # all_gather, reduce_scatter, per-NIC statements


def published_time_s(row: dict) -> float:
    """Published time, from the time column or from busbw (t = S * factor / busbw)."""
    if row["time_us"] is not None:
        return row["time_us"] * 1e-6
    n = placement(row["scope"])[1]
    return row["size"] * bus_factor(row["collective"], n) / (row["busbw"] * 1e9)


def busbw_gb_per_s(row: dict, t_s: float) -> float:
    """busbw of a row at time t."""
    n = placement(row["scope"])[1]
    return row["size"] * bus_factor(row["collective"], n) / t_s / 1e9


def multi_node(row: dict) -> bool:
    """Whether the row's group crosses nodes."""
    return row["scope"] == "nic" or not row["scope"].startswith("1x")


def fit(rows: list[dict], names: list[str], fixed: dict) -> tuple[dict, list[float]]:
    """Least squares of log(pred/published) over `rows` in `names`, the rest fixed."""
    from scipy.optimize import least_squares

    lo, hi = zip(*(BOUNDS[k] for k in names))
    pub = np.array([published_time_s(r) for r in rows])

    def residuals(x):
        p = {**fixed, **dict(zip(names, x))}
        return np.log([predict_time_s(r, p) for r in rows]) - np.log(pub)

    res = least_squares(residuals, [START[k] for k in names], bounds=(lo, hi), x_scale="jac")
    params = {**fixed, **dict(zip(names, res.x))}
    return params, [k for k in names if _at_bound(k, params[k])]


def _at_bound(name: str, value: float) -> bool:
    lo, hi = BOUNDS[name]
    return math.isclose(value, lo, rel_tol=1e-3, abs_tol=1e-6) or math.isclose(value, hi, rel_tol=1e-3)


def fit_kind(kind: str, rows: list[dict], h100: dict | None) -> tuple[dict, list[str]]:
    """Stage 1 then stage 2 for one GPU kind; h100's parameters fill what the kind cannot identify."""
    fixed = {**START, "nvls": 1.0, "off_graph": 0.0}
    if kind == "a100":
        fixed["off_graph"] = h100["off_graph"]
    if kind == "b200":
        fixed.update({k: h100[k] for k in ("launch_us", "alpha_up_us", "off_graph")})
    mine = [r for r in rows if r["kind"] == kind and r["use"] == "fit"]
    single, names, bound0 = [r for r in mine if not multi_node(r)], STAGE1[kind], []
    if "nvls" in names:  # nvls_speedup from the rows that name their algorithm, at >= 4 GiB
        named = [r for r in single if r["algo"] in ("nvls", "ring") and r["size"] >= 4 * 2**30]
        fixed, bound0 = fit(named, ["eta_up", "nvls"], fixed)
        names = [k for k in names if k != "nvls"]
    p, bound1 = fit(single, names, fixed)
    p, bound2 = fit([r for r in mine if multi_node(r)], STAGE2, p)
    return p, bound0 + bound1 + bound2


def fit_all(rows: list[dict]) -> dict[str, tuple[dict, list[str]]]:
    """Fitted parameters and the names at a bound, per GPU kind (h100 first: others borrow from it)."""
    out = {"h100": fit_kind("h100", rows, None)}
    return {**out, **{kind: fit_kind(kind, rows, out["h100"][0]) for kind in ("a100", "b200")}}


def error_rows(rows: list[dict], fits: dict) -> list[tuple[dict, float, float]]:
    """(row, published busbw, predicted busbw) for every row."""
    return [(r, busbw_gb_per_s(r, published_time_s(r)), busbw_gb_per_s(r, predict_time_s(r, fits[r["kind"]][0])))
            for r in rows]


def print_table(errs) -> None:
    """Per row: predicted vs published busbw and the relative error; then per kind and scope."""
    print(f"{'gpu':6}{'scope':7}{'collective':15}{'algo':8}{'size':>14}{'src':>15}{'use':>6}"
          f"{'pub GB/s':>10}{'pred':>9}{'err':>8}")
    for r, pub, pred in errs:
        size = r["size_bytes"] or "large"
        print(f"{r['gpu']:6}{r['scope']:7}{r['collective']:15}{r['algo']:8}{size:>14}{r['source']:>15}"
              f"{r['use']:>6}{pub:10.3g}{pred:9.3g}{pred / pub - 1:+8.1%}")
    print("\nmedian / max |busbw error| per kind and scope (fit rows; check rows apart)")
    groups: dict = {}
    for r, pub, pred in errs:
        scope = "1x4-7" if r["scope"] in ("1x4", "1x5", "1x6", "1x7") else r["scope"]
        groups.setdefault((r["kind"], r["gpu"], scope, r["use"]), []).append(abs(pred / pub - 1))
    for (kind, gpu, scope, use), e in sorted(groups.items()):
        print(f"  {kind:5} {gpu:6} {scope:6} {use:5} n={len(e):3}  median {statistics.median(e):6.1%}  "
              f"max {max(e):7.1%}")


def print_params(fits: dict) -> None:
    """The fitted numbers per kind, and any at a bound."""
    for kind, (p, bound) in fits.items():
        used = [k for k in BOUNDS if not k.startswith("off_") or k in STAGE1[kind] + ["off_graph"]]
        shown = {k: round(float(p[k]), 4) for k in used}
        print(f"{kind}: {shown}" + (f"  AT BOUND: {bound}" if bound else ""))


PROFILE_KIND = {"a100-80gb": "a100", "a100-40gb": "a100", "h100-sxm": "h100", "h100-sxm-500w": "h100", "h200": "h100",
                "h800": "h100", "b200": "b200", "mi300x": "h100", "v100-sxm3-32gb": "a100",
                "b300": "b200", "gb200": "b200", "mi355x": "h100"}  # no published collective rows: nearest generation
CLUSTER_KIND = {"dgx-a100": "a100", "dgx-h100": "h100", "hgx-h200": "h100", "dgx-b200": "b200", "mi300x-node": "h100"}
# dgx-b200 has ConnectX-7 InfiniBand (datasheet) like dgx-h100, so its alpha_out is the IB fit, not the EFA one.
ALPHA_OUT_KIND = {"dgx-b200": "h100"}
MARK = "NCCL collectives:"


MESH_ROWS = ROOT / "benchmarks" / "data" / "kernels" / "collectives_mi300x.json"
MESH_LINK_GB_PER_S = 64.0  # one MI300X Infinity Fabric link per direction (clusters/mi300x-node.yaml sources)


def mesh_eta_up() -> float:
    """eta_up of an Infinity Fabric mesh: the mean over the measured MI300X all-reduce rows of busbw / (the r-1
    links a group of r uses x 64 GB/s): 47.7 / 64 and 312.9 / 448 (ml-engineering network/README.md)."""
    rows = json.loads(MESH_ROWS.read_text())["rows"]
    return statistics.mean(r["value"] / (MESH_LINK_GB_PER_S * (int(r["shape"].split()[0]) - 1)) for r in rows)


def profile_fields(name: str, p: dict) -> dict:
    """The efficiency fields this script owns, for one GPU profile (MI300X/MI355X's scale_up from their mesh rows)."""
    p = {k: float(v) for k, v in p.items()}
    nvls = 1.0 if name.startswith("mi") else p["nvls"]  # AMD Infinity Fabric: no NVLink SHARP
    if name.startswith("mi"):
        p["eta_up"] = mesh_eta_up()
    return {"scale_up": round(p["eta_up"], 4), "scale_out": round(p["eta_out"], 4),
            "launch_us": round(p["launch_us"], 2), "up_half_mib": round(p["half_up_mib"], 2),
            "out_half_mib": round(p["half_out_mib"], 2), "nvls_speedup": round(nvls, 3)}


def note_for(name: str) -> str:
    """The sentence appended to fitted_on: which NCCL rows fitted which fields."""
    kind = PROFILE_KIND[name]
    rows = {"a100": "A100 1x8 all_reduce S2/S3/S4 sweeps and S7 1 KiB/1 GiB rows; 2x8 S7 all_reduce and all_gather, "
                    "nccl#812 and nccl-tests#119 statements, the nccl-tests#119 3x8 4-NIC all_reduce row; "
                    "out_half_mib at its 0.25 MiB floor, a chosen limit: no A100 cross-node row shows a "
                    "half-size penalty (the 4-NIC row is at the NIC plateau at ~128 MB, S7's 1 and 4 GiB "
                    "rows differ by 2%)",
            "h100": "H100 1x8 S5/S3/S6 all_reduce and S6 all_gather sweeps, H200 S3/S4 sweeps and spot values, "
                    "nccl#1455 and nccl-tests#326/#347 statements; H20 2x8 nccl#1244 rows up to 64 MiB, "
                    "nccl-tests#267/#309/#319, nccl#1649 and H200 4x8 EFA Ring statements",
            "b200": "B200 1x8 S4 sweep and nccl-tests 8 GiB rows, GB200 1x4 S3 Ring sweep (launch and alpha_up "
                    "from the h100 fit); B200 4x8 EFA S4 rows from 128 KiB"}[kind]
    head = f"{MARK} scale_up, scale_out (replacing any value above), launch_us, up_half_mib, out_half_mib and " \
           f"nvls_speedup from benchmarks/calibrate_nccl.py on {rows} (nccl_busbw.md)"
    if name in ("a100-40gb", "h200", "h100-sxm-500w"):
        head += "; shared with its NVLink generation"
    if name in ("h800", "mi300x", "mi355x"):
        head += f"; NOT MEASURED for {name}: copied from the h100 fit" + (", no NVLS" if name.startswith("mi") else "")
    if name.startswith("mi"):
        head += (f"; scale_up {mesh_eta_up():.4f} measured instead: the MI300X all-reduce busbw over the r-1 "
                 "Infinity Fabric links a group of r uses (benchmarks/data/kernels/collectives_mi300x.json: 2 GPUs "
                 "47.7 GB/s, 8 GPUs 312.9)" + ("; MI355X's own links not measured" if name == "mi355x" else ""))
    if name == "v100-sxm3-32gb":
        head += "; NOT MEASURED for v100-sxm3-32gb: copied from the a100 fit (its clusters take dgx-a100's latencies)"
    return head + "."


def write_profile(name: str, p: dict) -> None:
    """Update the owned fields of the efficiency block of gpus/NAME.yaml; append the note to fitted_on."""
    path = ROOT / "hardware_profiles" / "gpus" / f"{name}.yaml"
    head, _, tail = path.read_text().partition("\nefficiency:")
    block_lines, rest = _block(tail)
    eff = yaml.safe_load("efficiency:" + block_lines)["efficiency"]
    note = re.sub(rf"\s*{re.escape(MARK)}.*$", "", eff.pop("fitted_on", ""), flags=re.S)
    eff.update(profile_fields(name, p))
    kept = note.rstrip().rstrip(".;").rstrip()
    eff["fitted_on"] = f"{kept}; {note_for(name)}" if kept else note_for(name)  # calibrate.py's joint, "; "
    path.write_text(head + "\n" + yaml.safe_dump({"efficiency": eff}, sort_keys=False, width=100) + rest)


def _block(tail: str) -> tuple[str, str]:
    """Split the text after 'efficiency:' into its indented block and what follows at top level."""
    lines = tail.split("\n")
    end = next((i for i, ln in enumerate(lines[1:], 1) if ln and not ln.startswith((" ", "#"))), len(lines))
    return "\n".join(lines[:end]), "\n".join(lines[end:])


def write_cluster(name: str, p: dict, fits: dict) -> None:
    """Set alpha_up / alpha_out of clusters/NAME.yaml and replace their sources line."""
    path = ROOT / "hardware_profiles" / "clusters" / f"{name}.yaml"
    up, out = round(float(p["alpha_up_us"]), 3), round(float(p["alpha_out_us"]), 3)
    text = re.sub(r"(?m)^scale_up_latency_us: .*$", f"scale_up_latency_us: {up}", path.read_text())
    text = re.sub(r"(?m)^scale_out_latency_us: .*$", f"scale_out_latency_us: {out}", text)
    line = f'  - "scale_up_latency_us {up} and scale_out_latency_us {out}: {cluster_note(name, fits)}"'
    text = re.sub(r'(?m)^  - "scale_up_latency_us .*$', line.replace("\\", "\\\\"), text)
    path.write_text(text)


def cluster_note(name: str, fits: dict) -> str:
    """Where a cluster preset's alpha values come from."""
    kind = CLUSTER_KIND[name]
    efa = round(float(fits["b200"][0]["alpha_out_us"]), 1)
    src = {"a100": "A100 S7 1 KiB all_reduce/all_gather times (1x8, 2x8) and the S2/S3/S4 sweeps",
           "h100": "H100 S5/S6 1 KiB-512 KiB times and H20 2x8 nccl#1244 rows (4 B-64 MiB)",
           "b200": "H100 S5/S6 small sizes (alpha_up; no clean B200 small-size rows) and H20 2x8 nccl#1244 "
                   f"IB rows (alpha_out; this preset has CX-7 IB, the B200 4x8 AWS EFA S4 rows give {efa} us)"}[kind]
    extra = "; NOT MEASURED for this cluster: copied from the h100 fit" if name == "mi300x-node" else ""
    return f"per-step latencies fitted by benchmarks/calibrate_nccl.py on {src} (nccl_busbw.md){extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fit into GPU profiles and cluster presets")
    args = parser.parse_args()
    rows = load_rows()
    fits = fit_all(rows)
    print_table(error_rows(rows, fits))
    print_params(fits)
    if args.write:
        for name, kind in PROFILE_KIND.items():
            write_profile(name, fits[kind][0])
        for name, kind in CLUSTER_KIND.items():
            alpha_out = fits[ALPHA_OUT_KIND.get(name, kind)][0]["alpha_out_us"]
            write_cluster(name, {**fits[kind][0], "alpha_out_us": alpha_out}, fits)


if __name__ == "__main__":
    main()
