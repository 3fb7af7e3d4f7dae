#!/usr/bin/env python3
"""Writes the local EC2 peer's config (tests/peers/ec2_capacity_peer.py, `--config FILE`):
one capacity block offering for every capacity block purchase in a gpucap plan, at the window,
zone, count and price the plan was quoted, as AWS would offer them on the day.

Usage: offerings.py PLAN.json > peer.json   (Python 3 standard library only)
"""
import json
import sys

MAX_BLOCK = 64  # instances one block holds; larger purchases are split by gpucap apply


def parts(n):
    k = -(-n // MAX_BLOCK)
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def main():
    plan = json.load(open(sys.argv[1]))
    offerings = []
    for a in plan["actions"]:
        if a["kind"] != "purchase_capacity_block" or a["cloud"] != "aws":
            continue
        for i, n in enumerate(parts(a["instances"])):
            offerings.append(
                {
                    "id": "cb-%s-%d" % (a["id"], i + 1),
                    "instance_type": a["instance_type"],
                    "zone": a.get("zone") or a["region"] + "a",
                    "instance_count": n,
                    "start": a["start"],
                    "end": a["end"],
                    "upfront_fee": "%.2f" % (a["cost"] * n / a["instances"]),
                    "currency": "USD",
                }
            )
    json.dump({"offerings": offerings}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
