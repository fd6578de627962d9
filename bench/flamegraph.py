"""Turns `perf script` output (stdin) into folded stacks and a flame graph SVG, for machines
without inferno: `perf script | python3 bench/flamegraph.py OUT.folded OUT.svg TITLE`.

Folded stacks are one line per distinct stack, `root;...;leaf count`, the format inferno and
flamegraph.pl read, so the folded file can be rendered again by either.
"""

import html
import sys
from collections import Counter


def folded(lines):
    """Counts each sampled stack of `perf script` output (a header line, then frames, leaf first)."""
    stacks, frames, command = Counter(), [], None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if command is not None:
                stacks[";".join([command] + frames[::-1])] += 1
            frames, command = [], None
        elif line[0] not in " \t":
            command = line.split()[0]
        else:
            parts = line.strip().split(maxsplit=1)
            symbol = parts[1] if len(parts) > 1 else parts[0]
            frames.append(symbol.rsplit(" (", 1)[0].replace(";", ":"))
    if command is not None:
        stacks[";".join([command] + frames[::-1])] += 1
    return stacks


def svg(stacks, title):
    """A flame graph: one box per frame, as wide as its share of the samples."""
    tree = {}
    for stack, count in stacks.items():
        node = tree
        for frame in stack.split(";"):
            entry = node.setdefault(frame, [0, {}])
            entry[0] += count
            node = entry[1]
    total = sum(stacks.values()) or 1
    width, row = 1200, 16
    boxes, depth_max = [], 0

    def walk(node, x, depth):
        nonlocal depth_max
        depth_max = max(depth_max, depth)
        for frame, (count, children) in sorted(node.items()):
            w = count * width / total
            if w >= 0.3:
                boxes.append((x, depth, w, frame, count))
                walk(children, x, depth + 1)
            x += w

    walk(tree, 0.0, 0)
    height = (depth_max + 3) * row
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="monospace" font-size="11">',
        f'<text x="4" y="12">{html.escape(title)} ({total} samples)</text>',
    ]
    for x, depth, w, frame, count in boxes:
        y = height - (depth + 1) * row
        hue = 10 + hash(frame) % 50
        label = html.escape(frame[: int(w / 7)]) if w > 21 else ""
        out.append(
            f'<g><title>{html.escape(frame)} ({count} samples, {100 * count / total:.2f}%)</title>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
            f'fill="hsl({hue},90%,60%)"/><text x="{x + 2:.1f}" y="{y + 11}">{label}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out)


def main():
    folded_path, svg_path, title = sys.argv[1:4]
    stacks = folded(sys.stdin)
    with open(folded_path, "w") as f:
        for stack, count in sorted(stacks.items()):
            f.write(f"{stack} {count}\n")
    with open(svg_path, "w") as f:
        f.write(svg(stacks, title))


main()
