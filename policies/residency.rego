# Gate: the plan buys only in the clouds and regions the organisation allows.
#
# Why: data residency (training data may not leave a jurisdiction), contracts (committed spend
# with one cloud) and security reviews limit where capacity may be bought. The planner honours
# the pools' placement, but a config edit or a user policy is easy to get wrong, so every action
# is checked again here. Releasing capacity is always allowed: it leaves a place, it does not
# enter one.
#
# Reads: input.actions[].{cloud, region, kind, cost}; data.allowed_clouds, data.allowed_regions
# (absent or empty: all allowed).
package gpucap.policies.residency

import data.gpucap.lib
import rego.v1

allowed_clouds := {c | some c in object.get(data, "allowed_clouds", [])}

allowed_regions := {r | some r in object.get(data, "allowed_regions", [])}

# The actions that buy or run capacity, as a list: a set of actions would compare whole
# actions (with their campaign lists) on every insertion.
buying := [a | some a in input.actions; a.kind != "release"]

deny contains d if {
	count(allowed_clouds) > 0
	some a in buying
	not a.cloud in allowed_clouds
	d := {
		"rule": "residency.cloud",
		"message": sprintf("action %s buys %s capacity on %s, which is not an allowed cloud (%s)", [a.id, lib.dollars(a.cost), a.cloud, concat(", ", sort(allowed_clouds))]),
		"action": a.id,
		"cloud": a.cloud,
		"amount": a.cost,
		"fix": sprintf("drop %s from pool %s, or add it to budget.allowed_clouds", [a.cloud, a.pool]),
	}
}

deny contains d if {
	count(allowed_regions) > 0
	some a in buying
	not a.region in allowed_regions
	d := {
		"rule": "residency.region",
		"message": sprintf("action %s buys %s capacity in %s/%s, which is not an allowed region (%s)", [a.id, lib.dollars(a.cost), a.cloud, a.region, concat(", ", sort(allowed_regions))]),
		"action": a.id,
		"region": a.region,
		"amount": a.cost,
		"fix": sprintf("drop %s from pool %s, or add it to budget.allowed_regions", [a.region, a.pool]),
	}
}
