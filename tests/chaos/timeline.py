"""A chaos run's timeline as SVG: faults as bands (one colour per kind, labelled), and per
second the acknowledged sends and their p99 latency (invoke to ok)."""
import html

COLOURS = {"isolate": "#f4a261", "split": "#e76f51", "bridge": "#e9c46a", "oneway": "#a8dadc",
           "flap": "#cdb4db", "kill": "#ef476f", "pause": "#90be6d", "restart": "#8d99ae"}


def per_second(events, seconds):
    invoked, acked, lat = {}, [0] * (int(seconds) + 2), [[] for _ in range(int(seconds) + 2)]
    for e in events:
        if e.get("f") != "send":
            continue
        if e["type"] == "invoke":
            invoked[e["value"]] = e["t"]
        elif e["type"] == "ok" and e["value"] in invoked:
            s = min(int(e["t"]), len(acked) - 1)
            acked[s] += 1
            lat[s].append(e["t"] - invoked[e["value"]])
    p99 = [sorted(v)[int(0.99 * (len(v) - 1))] * 1000 if v else 0 for v in lat]
    return acked, p99


def write(path, events, seconds, width=1000, height=320):
    acked, p99 = per_second(events, seconds)
    pad, h = 40, height - 80
    x = lambda t: pad + (width - 2 * pad) * min(t, seconds) / max(seconds, 1)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    starts = {}
    for e in events:
        if e.get("f") != "fault":
            continue
        if e["type"] == "start":
            starts[e["fault"]] = e["t"]
        elif e["fault"] in starts:
            t0 = starts.pop(e["fault"])
            c = COLOURS.get(e["fault"], "#ccc")
            out.append(f'<rect x="{x(t0):.1f}" y="{pad}" width="{max(x(e["t"]) - x(t0), 1):.1f}"'
                       f' height="{h}" fill="{c}" opacity="0.5"/>')
            out.append(f'<text x="{x(t0) + 2:.1f}" y="{pad - 4}">{html.escape(e["fault"])}</text>')
    for series, colour, label in ((acked, "#1d3557", "acknowledged/s"),
                                  (p99, "#d62828", "p99 ack latency (ms)")):
        top = max(series) or 1
        pts = " ".join(f"{x(i + 0.5):.1f},{pad + h - h * v / top:.1f}"
                       for i, v in enumerate(series))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out.append(f'<text x="{pad}" y="{height - (30 if colour == "#1d3557" else 14)}" '
                   f'fill="{colour}">{label}, max {top:.0f}</text>')
    out.append(f'<text x="{width - pad - 60}" y="{height - 14}">{seconds:.0f} s</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(out))
