# Gate: the plan's expected total cost stays within `budget.total`.
#
# Why: the total is what FinOps signs off for the planning horizon. A plan over it must not be
# applied until someone raises the budget or trims the campaigns; a plan close to it (90 % or
# more) is worth a look, because a slipped campaign or a price change tips it over.
#
# Reads: input.cost.expected_total; data.total (absent: no limit).
package gpucap.policies.budget_total

import data.gpucap.lib
import rego.v1

deny contains d if {
	limit := data.total
	amount := input.cost.expected_total
	amount > limit
	excess := amount - limit
	d := {
		"rule": "budget.total",
		"message": sprintf("expected cost %s exceeds the total budget %s by %s", [lib.dollars(amount), lib.dollars(limit), lib.dollars(excess)]),
		"amount": amount,
		"limit": limit,
		"excess": excess,
		"fix": "raise budget.total, or shorten or drop campaigns",
	}
}

warn contains d if {
	limit := data.total
	amount := input.cost.expected_total
	amount <= limit
	amount >= lib.near_limit_share * limit
	d := {
		"rule": "budget.total.near",
		"message": sprintf("expected cost %s is %s of the total budget %s", [lib.dollars(amount), lib.percent(amount, limit), lib.dollars(limit)]),
		"amount": amount,
		"limit": limit,
		"fix": "check the slip and upside scenarios fit, or raise budget.total",
	}
}
