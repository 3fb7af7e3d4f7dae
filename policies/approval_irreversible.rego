# Gate: irreversible spend above `budget.approval_above` needs a sign-off before apply.
#
# Why: capacity blocks, commitments and future-dated reservations cannot be cancelled. On-demand
# and spot can be turned off the day a campaign is dropped; a block bought for it is paid anyway.
# So the amount that cannot be undone, not the total, decides whether a person must approve.
#
# Reads: input.cost.irreversible, input.actions[] (irreversible ones), input.campaigns[].team;
# data.approval_above (absent: no approval needed).
package gpucap.policies.approval_irreversible

import data.gpucap.lib
import rego.v1

irreversible_actions := [a | some a in input.actions; a.irreversible == true]

# Teams whose campaigns the irreversible actions serve: their owners co-sign.
teams := sort({lib.campaigns[name].team |
	some a in irreversible_actions
	some name in a.campaigns
	is_string(lib.campaigns[name].team)
})

approvers := array.concat(["budget owner (FinOps)"], [sprintf("team %s", [t]) | some t in teams])

approval contains d if {
	limit := data.approval_above
	amount := input.cost.irreversible
	amount > limit
	excess := amount - limit
	d := {
		"rule": "approval.irreversible",
		"message": sprintf("irreversible spend %s in %d actions exceeds the approval threshold %s by %s; needs approval from %s", [lib.dollars(amount), count(irreversible_actions), lib.dollars(limit), lib.dollars(excess), concat(", ", approvers)]),
		"amount": amount,
		"limit": limit,
		"excess": excess,
		"approvers": approvers,
		"actions": sort([a.id | some a in irreversible_actions]),
		"fix": "get the approvers' sign-off, or raise budget.approval_above, or plan fewer capacity blocks and commitments",
	}
}
