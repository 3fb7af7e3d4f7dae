#!/usr/bin/env python3
"""Writes the board exercise's two forecasts (weekly rows, GPUs): run it from this directory.

- production-inference.csv: today's LLM feature served on A100s in us-east-1: 640 GPUs in the
  first week of 2027, growing 1.5 % a month (compounded weekly), with an 80 % interval that
  widens by 2 points a year (p10 -8 %, p90 +10 % in 2027).
- experiments.csv: evaluation runs and sweeps beside it: 96 GPUs on quiet weeks, 192 on every
  fourth week (the sweeps), p90 +25 %.

The figures are the exercise's assumptions, not measurements.
"""

import datetime as dt
import math

START = dt.date(2027, 1, 4)  # a Monday, the planning start
END = dt.date(2030, 4, 1)  # the end of the horizon
WEEKLY_GROWTH = 1.015 ** (12 / 52)


def weeks():
    d, k = START, 0
    while d < END:
        yield k, d
        d += dt.timedelta(weeks=1)
        k += 1


with open("production-inference.csv", "w") as f:
    f.write("timestamp,pool,p50,p10,p90\n")
    for k, d in weeks():
        years = k / 52
        p50 = 640 * WEEKLY_GROWTH**k
        low = p50 * (1 - 0.08 - 0.02 * years)
        high = p50 * (1 + 0.10 + 0.02 * years)
        f.write(f"{d},a100-east,{math.ceil(p50)},{math.floor(low)},{math.ceil(high)}\n")

with open("experiments.csv", "w") as f:
    f.write("timestamp,pool,p50,p10,p90\n")
    for k, d in weeks():
        p50 = 192 if k % 4 == 3 else 96
        f.write(f"{d},a100-east,{p50},{p50 // 2},{math.ceil(p50 * 1.25)}\n")
