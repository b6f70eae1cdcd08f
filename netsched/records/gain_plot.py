"""`netsched report --plot FILE.svg`: the estimated gain over the default per week, one series per
priority class, each point with its 95% interval. SVG written by hand: the serving image has no plotting
library (matplotlib comes with the `train` extra only), and an SVG opens in any browser."""

from __future__ import annotations

from html import escape

from netsched.records.weekly import WeekClass

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 360, 70, 150, 40, 60
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def gain_svg(rows: list[WeekClass], title: str) -> str:
    """The chart of the rows' gains (rows without one are left out; no gain at all: an empty chart that
    says so)."""
    points = [r for r in rows if r.gain is not None]
    weeks = sorted({r.week for r in rows})
    classes = sorted({r.priority_class for r in points})
    values = [100 * v for r in points if r.gain for v in (r.gain.gain_low, r.gain.gain_high)] + [0.0]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    low, high = low - 0.05 * span, high + 0.05 * span
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(week: str, k: int) -> float:
        slot = plot_w / max(1, len(weeks))
        offset = (k + 1) / (len(classes) + 1) if classes else 0.5
        return LEFT + slot * (weeks.index(week) + offset)

    def y(percent: float) -> float:
        return TOP + plot_h * (high - percent) / (high - low)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
           f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{LEFT + plot_w}" y2="{y(0):.1f}" stroke="#999"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="black"/>']
    for k in range(5):
        tick = low + (high - low) * k / 4
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:+.1f}%</text>')
    out.append(f'<text x="16" y="{TOP + plot_h / 2:.0f}" transform="rotate(-90 16 {TOP + plot_h / 2:.0f})" '
               'text-anchor="middle">estimated gain over the default (95% CI)</text>')
    step = max(1, len(weeks) // 12)  # at most a dozen week labels
    for week in weeks[::step]:
        out.append(f'<text x="{x(week, -1) + plot_w / max(1, len(weeks)) / 2:.1f}" y="{TOP + plot_h + 18}" '
                   f'text-anchor="middle">{escape(week)}</text>')
    for k, cls in enumerate(classes):
        colour = COLOURS[k % len(COLOURS)]
        for week, won in ((r.week, r.gain) for r in points if r.priority_class == cls and r.gain):
            px = x(week, k)
            out.append(f'<line x1="{px:.1f}" y1="{y(100 * won.gain_low):.1f}" x2="{px:.1f}" '
                       f'y2="{y(100 * won.gain_high):.1f}" stroke="{colour}"/>')
            out.append(f'<circle cx="{px:.1f}" cy="{y(100 * won.gain):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{TOP + 18 * k}" width="10" height="10" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 28}" y="{TOP + 18 * k + 10}">{escape(cls)}</text>')
    if not points:
        out.append(f'<text x="{LEFT + 10}" y="{TOP + 20}">no job to estimate</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
