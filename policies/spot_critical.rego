# Gate: critical campaigns never run on spot.
#
# Why: a spot reclaim can stop a run at any hour with two minutes' notice (30 s on GCP and
# Azure). A campaign marked critical has a date to meet; even if its training loop checkpoints
# and could be interrupted, losing capacity for hours while spot is scarce is exactly the risk
# the priority says not to take. Non-interruptible campaigns of any priority on spot are a
# warning: the planner should never do that, so it points at a config or planner bug.
#
# Reads: input.actions[] of kind run_spot and their campaigns; input.campaigns[].{priority,
# interruptible}. No data keys.
package gpucap.policies.spot_critical

import data.gpucap.lib
import rego.v1

# Campaigns by name, split by what a spot action must not serve. Each action's campaign
# names are looked up in these objects: linear in the plan's (action, campaign) pairs, never
# a set of pairs (comparing actions that list thousands of campaigns made 10,000-campaign
# plans run out of time).
critical := {c.name: c | some c in input.campaigns; c.priority == "critical"}

uninterruptible := {c.name: c |
	some c in input.campaigns
	c.priority != "critical"
	c.interruptible == false
}

spot_actions := [a | some a in input.actions; a.kind == "run_spot"]

deny contains d if {
	some a in spot_actions
	some name in a.campaigns
	c := critical[name]
	d := {
		"rule": "spot.critical",
		"message": sprintf("action %s runs critical campaign %s on spot (%d GPUs, %s)", [a.id, c.name, a.gpus, lib.dollars(a.cost)]),
		"action": a.id,
		"campaign": c.name,
		"amount": a.cost,
		"fix": sprintf("plan %s on on-demand, reserved or block capacity (remove spot from pool %s), or lower its priority", [c.name, a.pool]),
	}
}

warn contains d if {
	some a in spot_actions
	some name in a.campaigns
	c := uninterruptible[name]
	d := {
		"rule": "spot.uninterruptible",
		"message": sprintf("action %s runs campaign %s on spot, but the campaign is not interruptible", [a.id, c.name]),
		"action": a.id,
		"campaign": c.name,
		"amount": a.cost,
		"fix": sprintf("mark %s interruptible if it checkpoints, or keep it off spot", [c.name]),
	}
}
