"""The result of a bisect: the first bad commit, the figures either side, the cost, a PNG.

Written to `results/bisect/<session>/result.json` and `bisect.png`. The accept lengths
before and after are those of the runs that classified the last good and the first bad
commit (GOOD's and BAD's own runs when the range ends at an endpoint), each on the
prompts it used, with its bootstrap CI; the paired difference from GOOD on the same
prompts is the figure the step was decided on.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from harness.protocols.bisect import search
from harness.protocols.bisect.driver import SessionOutcome
from harness.protocols.bisect.journal import BisectResult, Commit, Side
from harness.secrets import redact_text

RESULT_FILE = "result.json"
PLOT_FILE = "bisect.png"


def _side(outcome: SessionOutcome, index: int) -> Side:
    """The commit at `index` (-1: GOOD) and the run that classified it."""
    s = outcome.session
    commit: Commit
    if index < 0:
        commit = {"sha": s.good_sha, "subject": "(GOOD)", "author_date": ""}
        role = "good"
    else:
        commit = s.commits[index]
        role = outcome.final.get(index, "bad" if index == len(s.commits) - 1 else "")
    entry = outcome.entries.get(role, {})
    stat = entry.get("stat", {})
    return {"sha": commit["sha"], "subject": commit["subject"],
            "author_date": commit["author_date"], "role": role,
            "run_dir": entry.get("run_dir"), "accept_length": entry.get("accept_length"),
            "ci": entry.get("ci"), "requests": entry.get("requests"),
            "verdict": entry.get("verdict"), "difference": stat.get("difference"),
            "difference_se": stat.get("se")}


def summarise(outcome: SessionOutcome) -> BisectResult:
    s = outcome.session
    measured = [e for e in outcome.entries.values() if "requests" in e]
    result: BisectResult = {
        "session": s.session, "suite": s.suite, "metric": s.metric,
        "good": s.good, "bad": s.bad, "commits": len(s.commits),
        "first_parent": s.first_parent, "paths": s.paths,
        "steps": len(outcome.order), "max_steps": search.max_steps(len(s.commits)),
        "runs": len(measured), "requests": sum(int(e.get("requests") or 0) for e in measured),
        "skipped": [s.commits[i]["sha"] for i in outcome.order
                    if outcome.outcomes[i] == "skip"],
        "undecided": [s.commits[i]["sha"] for i in outcome.order
                      if outcome.outcomes[i] == "undecided"],
    }
    endpoint = outcome.endpoint
    result["endpoints"] = None if endpoint is None else {
        "difference": endpoint.estimate, "ci": endpoint.ci, "p_value": endpoint.p_value,
        "alpha": s.alpha, "differ": outcome.differ, "good": _side(outcome, -1),
        "bad": _side(outcome, len(s.commits) - 1)}
    if not outcome.differ:
        result["status"] = "no difference"
        return result
    where = search.bounds(len(s.commits), outcome.outcomes)
    result["status"] = "found" if where.found else "range"
    result["candidates"] = [s.commits[i] for i in where.candidates]
    result["first_bad"] = _side(outcome, where.hi) if where.found else None
    result["before"], result["after"] = _side(outcome, where.lo), _side(outcome, where.hi)
    result["bad_outside_paths"] = bool(s.bad_added and where.found
                                       and where.hi == len(s.commits) - 1)
    return result


def write(outcome: SessionOutcome, result: BisectResult) -> Path:
    folder = outcome.session.folder
    text = redact_text(json.dumps(result, indent=2, default=str))  # an output: no secret
    (folder / RESULT_FILE).write_text(text + "\n")
    return folder / RESULT_FILE


def _figure(side: Side) -> str:
    value, ci = side["accept_length"], side["ci"]
    if value is None:
        return "no figure"
    shown = f"{value:.3f}" + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "")
    return f"{shown} on {side['requests']} prompts"


def _p(value: float) -> str:
    return "p < 0.0001" if value < 1e-4 else f"p = {value:.2g}"


def render(result: BisectResult) -> list[str]:
    """The result as a user reads it."""
    endpoints = result.get("endpoints")
    suite = Path(result["suite"]).stem
    lines = [f"bisect {result['session']}: {suite}, {result['commits']} commits "
             f"between GOOD and BAD ({'first-parent' if result['first_parent'] else 'all'}"
             + (f", touching {' '.join(result['paths'])}" if result["paths"] else "") + ")"]
    if endpoints is not None:
        ci = endpoints["ci"]
        lines.append(f"endpoints  BAD - GOOD = {endpoints['difference']:+.3f} "
                     + (f"({(1 - endpoints['alpha']):.0%} CI {ci[0]:+.3f}..{ci[1]:+.3f}, "
                        if ci else "(") + f"paired, {_p(endpoints['p_value'])})")
        lines += [f"           GOOD {_figure(endpoints['good'])}",
                  f"           BAD  {_figure(endpoints['bad'])}"]
    if result["status"] == "no difference":
        alpha = f" at alpha {endpoints['alpha']:g}" if endpoints is not None else ""
        lines.append(f"GOOD and BAD do not differ significantly{alpha} "
                     f"in {result['metric']}: nothing to bisect (more prompts: --prompts)")
    elif result["status"] == "found" and (bad := result.get("first_bad")) is not None:
        lines += [f"first bad commit  {bad['sha']}",
                  f"                  {bad['subject']}",
                  f"                  authored {bad['author_date']}"]
    else:
        lines.append("the first bad commit is one of these (skipped or undecided commits "
                     "stand between the last good and the first bad):")
        lines += [f"  {c['sha'][:12]} {c['subject']}" for c in result["candidates"]]
    if result["status"] != "no difference":
        lines += [f"before  {_figure(result['before'])}  [{result['before']['sha'][:12]}]",
                  f"after   {_figure(result['after'])}  [{result['after']['sha'][:12]}]"]
        after = result["after"]
        difference, se = after["difference"], after["difference_se"]
        if difference is not None and se is not None:
            low, high = (difference + k * 1.96 * se for k in (-1, 1))
            lines.append(f"after - GOOD, paired on the same prompts: {difference:+.3f} "
                         f"(95% CI {low:+.3f}..{high:+.3f})")
        if result.get("bad_outside_paths"):
            lines.append("note: BAD is the first bad commit and touches none of --paths: the "
                         "change may lie outside them")
    skipped = len(result["skipped"]) + len(result["undecided"])
    lines.append(f"cost    {result['steps']} steps (log2 bound {result['max_steps']}"
                 + (f", {skipped} skipped or undecided" if skipped else "")
                 + f"), {result['runs']} runs, {result['requests']} requests in {result['metric']}")
    return lines


def plot(outcome: SessionOutcome, result: BisectResult) -> Path | None:
    """Accept length and the paired difference from GOOD along the commits visited."""
    matplotlib.use("Agg")

    s = outcome.session
    n = len(s.commits)
    colours = {"good": "tab:green", "bad": "tab:red", "undecided": "tab:orange",
               "reference": "tab:green", "differs": "tab:red"}
    points = [(0, _side(outcome, -1), "good")]
    points += [(i + 1, _side(outcome, i), outcome.outcomes[i]) for i in outcome.order]
    points.append((n, _side(outcome, n - 1), "bad"))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(7.0, 0.35 * n + 4), 6.5),
                                      sharex=True, constrained_layout=True)
    for x, side, verdict in points:
        value = side["accept_length"]
        if value is None:  # skipped: no figure
            for axis in (top, bottom):
                axis.axvline(x, color="grey", ls=":", lw=0.8)
            top.text(x, 0.02, verdict, transform=top.get_xaxis_transform(), ha="center",
                     fontsize=7, color="grey")
            continue
        ci = side["ci"] or [value, value]
        colour = colours.get(verdict, "grey")
        top.errorbar([x], [value], yerr=[[value - ci[0]], [ci[1] - value]],
                     fmt="o", color=colour, capsize=3)
        top.annotate(f"{side['requests']}", (x, ci[1]), textcoords="offset points",
                     xytext=(0, 3), ha="center", fontsize=7, color="dimgrey")
        difference, se = side["difference"], side["difference_se"]
        if difference is not None and se is not None:
            bottom.errorbar([x], [difference], yerr=[1.96 * se], fmt="o", color=colour,
                            capsize=3)
    if outcome.endpoint is not None:
        bottom.axhline(0.0, color="tab:green", lw=0.8)
        bottom.axhline(outcome.endpoint.estimate, color="tab:red", lw=0.8)
        bottom.axhline(outcome.endpoint.estimate / 2, color="black", ls=":", lw=0.8,
                       label="threshold (BAD - GOOD) / 2")
        bottom.plot([n], [outcome.endpoint.estimate], "o", color="tab:red")
        bottom.plot([0], [0.0], "o", color="tab:green")
        bottom.legend(loc="best", fontsize=8)
    first_bad = result.get("first_bad")
    if result.get("status") == "found" and first_bad is not None:
        x = s.commits.index(next(c for c in s.commits if c["sha"] == first_bad["sha"])) + 1
        for axis in (top, bottom):
            axis.axvline(x - 0.5, color="tab:red", ls="--", lw=0.8)

    top.legend(handles=[Line2D([], [], marker="o", ls="", color=colours[name], label=name)
                        for name in ("good", "bad", "undecided")], loc="best", fontsize=8)
    labels = ["GOOD"] + [c["sha"][:7] if i in outcome.outcomes or i == n - 1 else ""
                         for i, c in enumerate(s.commits)]
    bottom.set_xticks(range(n + 1), labels, rotation=60, fontsize=7)
    top.set_ylabel(f"accept length ({s.metric})")
    bottom.set_ylabel("paired difference from GOOD")
    top.set_title(f"{Path(s.suite).stem}: bisect {s.session} "
                  f"({result['steps']} steps, {result['requests']} requests)", fontsize=9)
    path = s.folder / PLOT_FILE
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
