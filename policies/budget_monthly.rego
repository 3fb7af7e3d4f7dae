# Gate: no calendar month of the plan costs more than `budget.monthly`.
#
# Why: cloud spend is booked and reviewed per month; a plan can fit its total yet put a whole
# quarter's capacity blocks into one month. Months at 90 % or more of the limit are warnings.
#
# Reads: input.cost.by_month[].{month, expected}; data.monthly (absent: no limit).
package gpucap.policies.budget_monthly

import data.gpucap.lib
import rego.v1

deny contains d if {
	limit := data.monthly
	some m in input.cost.by_month
	m.expected > limit
	excess := m.expected - limit
	d := {
		"rule": "budget.monthly",
		"message": sprintf("%s: expected cost %s exceeds the monthly budget %s by %s", [m.month, lib.dollars(m.expected), lib.dollars(limit), lib.dollars(excess)]),
		"month": m.month,
		"amount": m.expected,
		"limit": limit,
		"excess": excess,
		"fix": sprintf("raise budget.monthly, or move campaigns out of %s", [m.month]),
	}
}

warn contains d if {
	limit := data.monthly
	some m in input.cost.by_month
	m.expected <= limit
	m.expected >= lib.near_limit_share * limit
	d := {
		"rule": "budget.monthly.near",
		"message": sprintf("%s: expected cost %s is %s of the monthly budget %s", [m.month, lib.dollars(m.expected), lib.percent(m.expected, limit), lib.dollars(limit)]),
		"month": m.month,
		"amount": m.expected,
		"limit": limit,
		"fix": sprintf("leave headroom in %s (move a campaign), or raise budget.monthly", [m.month]),
	}
}
