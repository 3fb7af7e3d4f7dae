"""The plain hourly MILP of a gpucap.problem/v1, /v2 or /v3, solved with HiGHS (highspy): an
independent formulation, written from docs/problem-v1.md, docs/problem-v2.md and
docs/problem-v3.md, that the solver benchmark and tests compare gpucap's optimum and speed
against.

One variable per hour and offer (and scenario): integer term purchases n[o,s] at every allowed
start, active term instances A[o,t] = A[o,t-1] + n[o,t] - n[o,t-L] (bounded by max_instances),
integer on-demand x[k,o,t] and spot y[k,o,t] instances in every hour with demand, and per
scenario, pool and hour the two coverage rows of the spec.

v2: for a term offer with purchase rules, integer pieces k[o,s] with min*k <= n[o,s] <= max*k
(max: the offer's max_instances, else PIECE_BIG_M, when the offer states none) at
cost_per_purchase each; for each shared limit, scenario and hour, the weighted sum of active
term instances and of that scenario's hourly instances at most its cap.

v3: a binary z[g,p] per gang and allowed placement (one per gang, the same in every scenario),
and per scenario, gang, hour of its run and on-demand or term offer o of its placements, integer
nodes u[k,g,o,t] <= nodes * z[g, placement of o], summing to the gang's nodes; per offer and
hour the gangs' nodes at most that scenario's instances x[k,o,t] (on-demand) or the active term
instances A[o,t]. A gang's GPUs (nodes times its placements' gpus_per_instance) are firm demand.
This assigns nodes gang by gang, where gpucap's model only counts each placement's instances.

With `--runs`, hours are merged first into runs of identical hours: maximal spans in which no
pool's demand changes in any scenario and no term purchase starts or ends. Every hour of a run
has the same rows, so some optimal hourly plan uses the same instances in all of them, and the
MILP over runs (each hour's cost times the run's length) has the same optimum; this makes
multi-year problems with daily term starts small enough for HiGHS. The runs are cut from the
problem's own data, independently of how gpucap segments its model.

usage: python hourly_milp.py PROBLEM.json [--time-limit SECONDS] [--gap REL] [--runs]
prints one JSON object: status, objective, bound, seconds (HiGHS run time), build_seconds,
columns, rows.
"""

import argparse
import json
import math
import sys
import time

import highspy
import numpy as np


# Stands for "no maximum per purchase" where the offer has no max_instances either: more
# instances than any test problem could use in one purchase.
PIECE_BIG_M = 100000.0


def allowed_starts(offer, hours):
    starts = offer["starts"]
    if isinstance(starts, list):
        return sorted(set(s for s in starts if 0 <= s < hours))
    end = min(starts["to"], hours)
    return list(range(starts["from"], end, starts["step"])) if starts["from"] < end else []


def per_hour(segments, hours):
    level = np.zeros(hours + 1, dtype=np.int64)
    for start, end, gpus in segments:
        level[start] += gpus
        level[end] -= gpus
    return np.cumsum(level)[:hours]


def node_size(offers, placement):
    """The gpus_per_instance of a placement's offers."""
    return next(o["gpus_per_instance"] for o in offers if o.get("placement") == placement)


def runs_of(problem):
    """The run boundaries: 0, every hour where some demand changes, every term start and end
    (inside the horizon), and the horizon's end."""
    hours = problem["hours"]
    cuts = {0, hours}
    for scenario in problem["scenarios"]:
        for demand in scenario.get("demand", {}).values():
            for key in ("firm", "flex"):
                for start, end, _ in demand.get(key, []):
                    cuts.update(h for h in (start, end) if 0 <= h <= hours)
            for gang in demand.get("gangs", []):
                cuts.update(h for h in (gang["from"], gang["to"]) if 0 <= h <= hours)
    for offer in problem["offers"]:
        if offer["kind"] != "term":
            continue
        for s in allowed_starts(offer, hours):
            cuts.add(s)
            if s + offer["term_hours"] < hours:
                cuts.add(s + offer["term_hours"])
    return sorted(cuts)


def build(problem, runs=False):
    hours = problem["hours"]
    # Each "hour" of the model is a run [cut[i], cut[i+1]) weighted by its length; without
    # --runs, every run is one hour.
    cut = runs_of(problem) if runs else list(range(hours + 1))
    steps = len(cut) - 1
    length = [cut[i + 1] - cut[i] for i in range(steps)]
    index_of = {h: i for i, h in enumerate(cut)}
    offers = problem["offers"]
    scenarios = problem["scenarios"]
    # v3: times count periods of this many minutes; prices stay per instance-hour.
    period = (problem.get("period_minutes") or 60) / 60.0
    inf = highspy.kHighsInf
    cost, lower, upper, integer = [], [], [], []
    rows_lower, rows_upper, row_entries = [], [], []

    def column(c, lo, hi, is_int):
        cost.append(c)
        lower.append(lo)
        upper.append(hi)
        integer.append(is_int)
        return len(cost) - 1

    def row(lo, hi, entries):
        rows_lower.append(lo)
        rows_upper.append(hi)
        row_entries.append(entries)

    # Terms: purchases and active instances per hour.
    active = {}  # offer index -> list of column per hour (None before any start)
    for o, offer in enumerate(offers):
        if offer["kind"] != "term":
            continue
        limit = offer.get("max_instances")
        limit = inf if limit is None else float(limit)
        term = offer["term_hours"]
        price = offer["price_per_instance_hour"] * term * period + (
            offer.get("upfront_per_instance") or 0.0
        )
        buy = {index_of[s]: column(price, 0.0, limit, True) for s in allowed_starts(offer, hours)}
        if problem["schema"] in ("gpucap.problem/v2", "gpucap.problem/v3") and any(
            offer.get(f) is not None
            for f in ("min_purchase_instances", "max_purchase_instances", "cost_per_purchase")
        ):
            least = float(offer.get("min_purchase_instances") or 1)
            most = offer.get("max_purchase_instances")
            most = float(most) if most is not None else (limit if limit != inf else PIECE_BIG_M)
            for n in buy.values():
                k = column(offer.get("cost_per_purchase") or 0.0, 0.0, inf, True)
                row(0.0, inf, [(n, 1.0), (k, -least)])
                row(-inf, 0.0, [(n, 1.0), (k, -most)])
        ends = {}
        for s in allowed_starts(offer, hours):
            if s + term < hours:
                ends.setdefault(index_of[s + term], []).append(buy[index_of[s]])
        cols = []
        for t in range(steps):
            a = column(0.0, 0.0, limit, False)
            entries = [(a, 1.0)]
            if t > 0:
                entries.append((cols[-1], -1.0))
            if t in buy:
                entries.append((buy[t], -1.0))
            for b in ends.get(t, []):
                entries.append((b, 1.0))
            row(0.0, 0.0, entries)
            cols.append(a)
        active[o] = cols

    # Second stage, per scenario, pool and hour with demand.
    hourly = {}  # (scenario index, offer index, step) -> column
    for k_index, scenario in enumerate(scenarios):
        p = scenario["probability"]
        overrides = scenario.get("max_instances", {})
        for pool in problem["pools"]:
            demand = scenario.get("demand", {}).get(pool, {})
            gang_gpus = [
                [g["from"], g["to"], g["nodes"] * node_size(offers, g["placements"][0])]
                for g in demand.get("gangs", [])
            ]
            firm = per_hour(demand.get("firm", []) + gang_gpus, hours)
            flex = per_hour(demand.get("flex", []), hours)
            pool_offers = [(o, offer) for o, offer in enumerate(offers) if offer["pool"] == pool]
            for t in range(steps):
                h = cut[t]
                if firm[h] + flex[h] == 0:
                    continue
                firm_row, all_row = [], []
                for o, offer in pool_offers:
                    g = float(offer["gpus_per_instance"])
                    if offer["kind"] == "term":
                        firm_row.append((active[o][t], g))
                        all_row.append((active[o][t], g))
                        continue
                    limit = overrides.get(offer["id"], offer.get("max_instances"))
                    limit = inf if limit is None else float(limit)
                    price = (
                        offer["price_per_instance_hour"]
                        * (1.0 + (offer.get("overhead") or 0.0))
                        * period
                    )
                    x = column(p * price * length[t], 0.0, limit, True)
                    hourly[(k_index, o, t)] = x
                    all_row.append((x, g))
                    if offer["kind"] == "on_demand":
                        firm_row.append((x, g))
                if firm[h] > 0:
                    row(float(firm[h]), inf, firm_row)
                row(float(firm[h] + flex[h]), inf, all_row)

    # v3 gangs: one placement each, and their nodes on that placement's capacity, hour by hour.
    placement_of = {o: offer.get("placement") for o, offer in enumerate(offers)}
    choice = {}  # (gang id, placement) -> binary column
    for scenario in scenarios:
        for demand in scenario.get("demand", {}).values():
            for gang in demand.get("gangs", []):
                for q in gang["placements"]:
                    if (gang["id"], q) not in choice:
                        choice[(gang["id"], q)] = column(0.0, 0.0, 1.0, True)
    for gang_id in sorted({g for g, _ in choice}):
        row(1.0, 1.0, [(c, 1.0) for (g, _), c in choice.items() if g == gang_id])
    drawn = {}  # (scenario index, offer index, step) -> entries of gangs' nodes
    for k_index, scenario in enumerate(scenarios):
        for demand in scenario.get("demand", {}).values():
            for gang in demand.get("gangs", []):
                nodes = float(gang["nodes"])
                members = [
                    (o, choice[(gang["id"], placement_of[o])])
                    for o, offer in enumerate(offers)
                    if placement_of[o] in gang["placements"] and offer["kind"] != "spot"
                ]
                for t in range(steps):
                    if not (gang["from"] <= cut[t] < gang["to"]):
                        continue
                    total = []
                    for o, z in members:
                        u = column(0.0, 0.0, nodes, True)
                        row(-inf, 0.0, [(u, 1.0), (z, -nodes)])
                        total.append((u, 1.0))
                        drawn.setdefault((k_index, o, t), []).append((u, 1.0))
                    row(nodes, nodes, total)
    for (k_index, o, t), entries in drawn.items():
        capacity = active[o][t] if offers[o]["kind"] == "term" else hourly[(k_index, o, t)]
        row(-inf, 0.0, entries + [(capacity, -1.0)])

    # v2 shared limits, per scenario and hour (or run: every hour of a run has the same rows).
    ids = {offer["id"]: o for o, offer in enumerate(offers)}
    for limit in problem.get("shared_limits", []):
        members = [(ids[i], float(w)) for i, w in limit["offers"].items()]
        for k_index in range(len(scenarios)):
            for t in range(steps):
                entries = []
                for o, w in members:
                    if offers[o]["kind"] == "term":
                        entries.append((active[o][t], w))
                    elif (k_index, o, t) in hourly:
                        entries.append((hourly[(k_index, o, t)], w))
                if entries:
                    row(-inf, float(limit["cap"]), entries)

    lp = highspy.HighsLp()
    lp.num_col_ = len(cost)
    lp.num_row_ = len(rows_lower)
    lp.col_cost_ = np.array(cost, dtype=np.float64)
    lp.col_lower_ = np.array(lower, dtype=np.float64)
    lp.col_upper_ = np.array(upper, dtype=np.float64)
    lp.row_lower_ = np.array(rows_lower, dtype=np.float64)
    lp.row_upper_ = np.array(rows_upper, dtype=np.float64)
    starts = [0]
    index, value = [], []
    for entries in row_entries:
        for c, v in entries:
            index.append(c)
            value.append(v)
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = len(cost)
    lp.a_matrix_.num_row_ = len(rows_lower)
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in integer]
    return lp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--gap", type=float, default=1e-8)
    parser.add_argument("--runs", action="store_true", help="merge identical hours into runs (exact)")
    args = parser.parse_args()
    with open(args.problem) as f:
        problem = json.load(f)
    started = time.perf_counter()
    lp = build(problem, runs=args.runs)
    build_seconds = time.perf_counter() - started
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", args.time_limit)
    h.setOptionValue("mip_rel_gap", args.gap)
    h.setOptionValue("mip_abs_gap", 1e-9)
    h.passModel(lp)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    objective = info.objective_function_value
    bound = info.mip_dual_bound
    feasible = info.primal_solution_status == 2
    print(json.dumps({
        "status": status,
        "objective": objective if feasible else None,
        "bound": bound if math.isfinite(bound) else None,
        "seconds": h.getRunTime(),
        "build_seconds": build_seconds,
        "columns": lp.num_col_,
        "rows": lp.num_row_,
    }))


if __name__ == "__main__":
    sys.exit(main())
