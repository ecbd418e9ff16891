#!/usr/bin/env python3
"""The benchmark's scale curve as an SVG, drawn from the Results table of docs/src/benchmarks.md.

    python3 hack/scale-curve.py           writes docs/src/scale-curve.svg
    python3 hack/scale-curve.py --check   fails when that file is not what the table gives

It reads the rows `| provision N=<n> | s | <floor median> [<min>–<max>] | <provider ...> | ...` of the
first table under "## Results" and plots the time per machine (each figure divided by N) against N,
on a logarithmic axis: medians as lines, the repetitions' min–max as bars. Standard library only, and
the output is byte-for-byte the same for the same table, so CI can compare it.
"""

import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "docs/src/benchmarks.md"
FIGURE = ROOT / "docs/src/scale-curve.svg"

CELL = re.compile(r"^\s*([0-9.]+)\s*(?:\[\s*([0-9.]+)\s*[–-]\s*([0-9.]+)\s*\])?\s*$")
ROW = re.compile(r"^provision N=(\d+)$")


def results_rows(text):
    """(N, (floor median, min, max), (provider median, min, max)) for every `provision N=` row."""
    rows, inside, seen_table = [], False, False
    for line in text.splitlines():
        if line.startswith("#"):
            if seen_table:
                break
            inside = line.strip() == "## Results"
            continue
        if not inside:
            continue
        if not line.startswith("|"):
            if seen_table:
                break
            continue
        seen_table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = ROW.match(cells[0])
        if not match:
            continue
        figures = []
        for cell in cells[2:4]:
            m = CELL.match(cell)
            if not m:
                sys.exit(f"scale-curve: cannot read {cell!r} in the row {cells[0]!r}")
            median = float(m.group(1))
            low = float(m.group(2) or median)
            high = float(m.group(3) or median)
            figures.append((median, low, high))
        rows.append((int(match.group(1)), figures[0], figures[1]))
    if len(rows) < 2:
        sys.exit(f"scale-curve: fewer than two `provision N=` rows under ## Results in {CHAPTER}")
    return sorted(rows)


def svg(rows):
    width, height = 640, 360
    left, right, top, bottom = 70, 170, 30, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    sizes = [n for n, _, _ in rows]
    lo_n, hi_n = math.log10(min(sizes)), math.log10(max(sizes))
    per = [(n, tuple(v / n for v in f), tuple(v / n for v in p)) for n, f, p in rows]
    y_max = max(max(f[2], p[2]) for _, f, p in per)
    step = 0.1 if y_max <= 1 else 0.5
    y_top = math.ceil(y_max / step + 1e-9) * step

    def x(n):
        span = hi_n - lo_n or 1
        return left + (math.log10(n) - lo_n) / span * plot_w

    def y(v):
        return top + plot_h - v / y_top * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        "<title>Provisioning time per machine against N: floor and provider</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
    ]
    ticks = round(y_top / step)
    for i in range(ticks + 1):
        v = i * step
        out.append(
            f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + plot_w}" y2="{y(v):.1f}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>'
        )
    for n in sizes:
        out.append(
            f'<line x1="{x(n):.1f}" y1="{top}" x2="{x(n):.1f}" y2="{top + plot_h}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{x(n):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{n}</text>'
        )
    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 15}" text-anchor="middle">'
        "machines provisioned at once (N, logarithmic)</text>"
    )
    out.append(
        f'<text x="18" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + plot_h / 2:.1f})">seconds per machine (median ÷ N)</text>'
    )
    series = [("floor (raw Docker)", 1, "#4c78a8", 0), ("provider", 2, "#e45756", 1)]
    for name, index, colour, slot in series:
        offset = (slot - 0.5) * 6
        points = " ".join(f"{x(r[0]) + offset:.1f},{y(r[index][0]):.1f}" for r in per)
        out.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for r in per:
            cx = x(r[0]) + offset
            median, low, high = r[index]
            out.append(
                f'<line x1="{cx:.1f}" y1="{y(low):.1f}" x2="{cx:.1f}" y2="{y(high):.1f}" '
                f'stroke="{colour}"/>'
            )
            out.append(f'<circle cx="{cx:.1f}" cy="{y(median):.1f}" r="3.5" fill="{colour}"/>')
        ly = top + 20 + slot * 22
        out.append(
            f'<line x1="{left + plot_w + 15}" y1="{ly}" x2="{left + plot_w + 40}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + plot_w + 46}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    drawn = svg(results_rows(CHAPTER.read_text(encoding="utf-8")))
    if sys.argv[1:] == ["--check"]:
        current = FIGURE.read_text(encoding="utf-8") if FIGURE.exists() else ""
        if current != drawn:
            sys.exit(
                f"scale-curve: {FIGURE.relative_to(ROOT)} does not match the Results table of "
                f"{CHAPTER.relative_to(ROOT)}: run python3 hack/scale-curve.py"
            )
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    FIGURE.write_text(drawn, encoding="utf-8")
    print(f"wrote {FIGURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
