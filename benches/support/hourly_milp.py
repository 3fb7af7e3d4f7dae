"""The plain hourly MILP of a gpucap.problem/v1 or /v2, solved with HiGHS (highspy): an
independent formulation, written from docs/problem-v1.md and docs/problem-v2.md, that the solver
benchmark and tests compare gpucap's optimum and speed against.

One variable per hour and offer (and scenario): integer term purchases n[o,s] at every allowed
start, active term instances A[o,t] = A[o,t-1] + n[o,t] - n[o,t-L] (bounded by max_instances),
integer on-demand x[k,o,t] and spot y[k,o,t] instances in every hour with demand, and per
scenario, pool and hour the two coverage rows of the spec.

v2: for a term offer with purchase rules, integer pieces k[o,s] with min*k <= n[o,s] <= max*k
(max: the offer's max_instances, else PIECE_BIG_M, when the offer states none) at
cost_per_purchase each; for each shared limit, scenario and hour, the weighted sum of active
term instances and of that scenario's hourly instances at most its cap.

usage: python hourly_milp.py PROBLEM.json [--time-limit SECONDS] [--gap REL]
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


def build(problem):
    hours = problem["hours"]
    offers = problem["offers"]
    scenarios = problem["scenarios"]
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
        price = offer["price_per_instance_hour"] * term + (offer.get("upfront_per_instance") or 0.0)
        buy = {s: column(price, 0.0, limit, True) for s in allowed_starts(offer, hours)}
        if problem["schema"] == "gpucap.problem/v2" and any(
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
        cols = []
        for t in range(hours):
            a = column(0.0, 0.0, limit, False)
            entries = [(a, 1.0)]
            if t > 0:
                entries.append((cols[-1], -1.0))
            if t in buy:
                entries.append((buy[t], -1.0))
            if t - term in buy:
                entries.append((buy[t - term], 1.0))
            row(0.0, 0.0, entries)
            cols.append(a)
        active[o] = cols

    # Second stage, per scenario, pool and hour with demand.
    hourly = {}  # (scenario index, offer index, hour) -> column
    for k_index, scenario in enumerate(scenarios):
        p = scenario["probability"]
        overrides = scenario.get("max_instances", {})
        for pool in problem["pools"]:
            demand = scenario.get("demand", {}).get(pool, {})
            firm = per_hour(demand.get("firm", []), hours)
            flex = per_hour(demand.get("flex", []), hours)
            pool_offers = [(o, offer) for o, offer in enumerate(offers) if offer["pool"] == pool]
            for t in range(hours):
                if firm[t] + flex[t] == 0:
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
                    price = offer["price_per_instance_hour"] * (1.0 + (offer.get("overhead") or 0.0))
                    x = column(p * price, 0.0, limit, True)
                    hourly[(k_index, o, t)] = x
                    all_row.append((x, g))
                    if offer["kind"] == "on_demand":
                        firm_row.append((x, g))
                if firm[t] > 0:
                    row(float(firm[t]), inf, firm_row)
                row(float(firm[t] + flex[t]), inf, all_row)

    # v2 shared limits, per scenario and hour.
    ids = {offer["id"]: o for o, offer in enumerate(offers)}
    for limit in problem.get("shared_limits", []):
        members = [(ids[i], float(w)) for i, w in limit["offers"].items()]
        for k_index in range(len(scenarios)):
            for t in range(hours):
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
    args = parser.parse_args()
    with open(args.problem) as f:
        problem = json.load(f)
    started = time.perf_counter()
    lp = build(problem)
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
