"""The output of `bench train`: the throughput table with ratios against the best PyTorch variant,
the does-it-train check (loss on a fixed batch, side by side), and the bar chart."""
from __future__ import annotations

import math
from typing import Dict, List, Optional

LABELS = {("ours", "aethercl"): "AetherCL ocl_llm",
          ("ours", "aethercl_graph"): "AetherCL ocl_llm, graph replay",
          ("torch", "eager"): "PyTorch eager (plain)",
          ("torch", "sdpa_fused"): "PyTorch SDPA + fused AdamW",
          ("torch", "compile"): "PyTorch torch.compile"}
CNN_LABELS = {("torch", "sdpa_fused"): "PyTorch fused AdamW (+channels_last)"}


def label(row: dict, model: str) -> str:
    key = (row["side"], row["variant"])
    return (CNN_LABELS.get(key) if model == "cnn" else None) or LABELS.get(key, row["variant"])


def add_rates(rows: List[dict], items: int) -> Optional[dict]:
    """Fills items_per_s and ratio_vs_best_torch in every timed row; returns the best torch row."""
    timed = [r for r in rows if "median_ms" in r]
    for r in timed:
        r["items_per_s"] = items / (r["median_ms"] / 1e3)
    torch_rows = [r for r in timed if r["side"] == "torch"]
    best = max(torch_rows, key=lambda r: r["items_per_s"], default=None)
    for r in timed:
        r["ratio_vs_best_torch"] = r["items_per_s"] / best["items_per_s"] if best else None
    return best


def _mib(value) -> str:
    return f"{value / 2**20:,.0f} MiB" if value else "-"


def throughput_table(model: str, rows: List[dict], unit: str, best: Optional[dict]) -> str:
    head = (f"  {'variant':<36} {'prec':<10} {'step ms':>9} {unit + '/s':>13} "
            f"{'vs best torch':>13} {'peak memory':>12}")
    lines = [head, "  " + "-" * (len(head) - 2)]
    for r in rows:
        name = label(r, model)
        if "median_ms" not in r:
            lines.append(f"  {name:<36} {r['precision']:<10} skipped: {r.get('skipped', '?')}")
            continue
        ratio = f"{r['ratio_vs_best_torch']:.2f}x" if r.get("ratio_vs_best_torch") else "-"
        lines.append(f"  {name:<36} {r['precision']:<10} {r['median_ms']:>9.2f} "
                     f"{r['items_per_s']:>13,.0f} {ratio:>13} {_mib(r.get('peak_bytes')):>12}")
    if best:
        lines.append(f"  best PyTorch: {label(best, model)} {best['precision']} "
                     f"({best['items_per_s']:,.0f} {unit}/s)")
    return "\n".join(lines)


def loss_check(model: str, rows: List[dict]) -> Dict[str, object]:
    """Loss on the fixed batch before and after the check steps per variant. A variant passes when
    its fall is within a factor of 3 of the reference fall (our fp32 where it ran)."""
    checked = [r for r in rows if len(r.get("check_losses", [])) >= 2]
    if not checked:
        return {"rows": [], "text": "  (no check steps)"}
    ref = next((r for r in checked if r["side"] == "ours" and r["precision"] == "fp32"),
               checked[0])
    ref_fall = ref["check_losses"][0] - ref["check_losses"][-1]
    steps = len(ref["check_losses"])
    lines = [f"  {'variant':<36} {'prec':<10} {'loss first':>10} {'loss last':>10} {'fall':>8} "
             f"{'vs ref':>7}  (fixed batch, {steps} steps; ref: {label(ref, model)} "
             f"{ref['precision']})"]
    out = []
    for r in checked:
        first, last = r["check_losses"][0], r["check_losses"][-1]
        fall = first - last
        ratio = fall / ref_fall if ref_fall > 0 else float("nan")
        ok = math.isfinite(ratio) and 1 / 3 <= ratio <= 3
        out.append({"side": r["side"], "variant": r["variant"], "precision": r["precision"],
                    "first": first, "last": last, "fall": fall, "fall_vs_ref": ratio, "ok": ok})
        lines.append(f"  {label(r, model):<36} {r['precision']:<10} {first:>10.4f} {last:>10.4f} "
                     f"{fall:>8.4f} {ratio:>6.2f}x  {'ok' if ok else 'CHECK: not the same order'}")
    return {"rows": out, "text": "\n".join(lines),
            "all_ok": all(o["ok"] for o in out)}


def plot(results: List[dict], path: str, device: str) -> None:
    """One panel per model: a bar per timed variant and precision (throughput), ours highlighted."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.8), squeeze=False)
    for ax, res in zip(axes[0], results):
        timed = [r for r in res["rows"] if "items_per_s" in r]
        names = [f"{label(r, res['model'])}\n{r['precision']}" for r in timed]
        values = [r["items_per_s"] for r in timed]
        colors = ["tab:blue" if r["side"] == "ours" else "tab:gray" for r in timed]
        bars = ax.barh(range(len(timed)), values, color=colors)
        ax.set_yticks(range(len(timed)), names, fontsize=7)
        ax.invert_yaxis()
        for bar, r in zip(bars, timed):
            ratio = r.get("ratio_vs_best_torch")
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                    f" {r['items_per_s']:,.0f}" + (f" ({ratio:.2f}x)" if ratio else ""),
                    va="center", fontsize=7)
        ax.set_xlabel(f"{res['unit']} per second (median step)")
        ax.set_title(f"{res['short_title']}\n{device}", fontsize=9)
        ax.margins(x=0.25)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
