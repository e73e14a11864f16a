"""Plots of bench/tenancy.py (matplotlib, PNG): served.png, per-tenant rows served per second
over time in (b) (1:2 and equal weights); ttft.png, the interactive TTFT distributions of (a)
idle and under the batch flood for each engine; throughput.png, (d)'s output tokens/s of each
alternating round on zinc --tenants and zinc FCFS, with the machine's load average."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {"tenants": "zinc --tenants", "noguard": "zinc --tenants\n--interactive-guard 0",
         "noclass": "zinc --tenants\n--no-class-prefill",
         "fcfs": "zinc FCFS", "llama": "llama-server"}


def _rates(samples, who):
    xs, ys = [], []
    for (t0, r0), (t1, r1) in zip(samples, samples[1:]):
        if t1 > t0:
            xs.append((t0 + t1) / 2)
            ys.append((r1.get(who, 0.0) - r0.get(who, 0.0)) / (t1 - t0))
    return xs, ys


def plot(res, out):
    phases = [(k, ts) for k, ts in (("b12", ("w1", "w2")), ("beq", ("e1", "e2")))
              if res.get(k, {}).get("samples")]
    if phases:
        fig, axes = plt.subplots(len(phases), 1, figsize=(8, 3.2 * len(phases)), squeeze=False)
        for ax, (k, ts) in zip(axes[:, 0], phases):
            for who in ts:
                xs, ys = _rates(res[k]["samples"], who)
                ax.plot(xs, ys, label=who, marker=".", linewidth=1)
            title = "weights 1:2" if k == "b12" else "equal weights"
            ax.set_title(f"(b) {title}: rows served per second (zinc_tenant_served_rows_total)")
            ax.set_xlabel("s")
            ax.set_ylabel("rows / s")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "served.png", dpi=110)
        plt.close(fig)
    if res.get("a"):
        cols = [c for c in NAMES if c in res["a"]]
        fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(cols)), 4))
        data, labels, pos = [], [], []
        for i, c in enumerate(cols):
            for j, ph in enumerate(("idle", "flood")):
                xs = res["a"][c][ph]["samples"]
                data.append(xs if xs else [float("nan")])
                labels.append(f"{NAMES[c]}\n{ph}")
                pos.append(3 * i + j)
        ax.boxplot(data, positions=pos, widths=0.7, whis=(0, 100))
        ax.set_xticks(pos)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("interactive TTFT, s (log)")
        ax.set_title("(a) interactive TTFT, idle vs under a batch flood (whiskers: min/max)")
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(out / "ttft.png", dpi=110)
        plt.close(fig)
    rounds = res.get("d_rounds") or []
    if rounds:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        for eng, mk in (("tenants", "o"), ("fcfs", "s")):
            rs = [(i, r) for i, r in enumerate(rounds) if r["engine"] == eng]
            ax.plot([i for i, _ in rs], [r["output_tok_s"] for _, r in rs], mk,
                    label=NAMES[eng], markersize=7)
        ax.set_xticks(range(len(rounds)))
        ax.set_xticklabels([f"{r['engine']}\nround {r['round']}" for r in rounds], fontsize=7)
        ax.set_ylabel("output tok/s")
        ax.set_ylim(bottom=0)
        ax.set_title("(d) 1:2 load, alternating rounds on both servers")
        ax.grid(alpha=0.3)
        loads = [(r.get("loadavg") or [None])[0] for r in rounds]
        if all(x is not None for x in loads):
            ax2 = ax.twinx()
            ax2.plot(range(len(rounds)), loads, color="grey", linestyle=":")
            ax2.set_ylabel("load average", color="grey")
            ax2.set_ylim(bottom=0)
        ax.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        plt.close(fig)
