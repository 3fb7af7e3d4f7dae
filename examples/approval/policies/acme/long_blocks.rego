# ACME's own gate: capacity blocks longer than 14 days tie up a lot of money for one campaign
# schedule, so the platform team signs them off (besides the built-in irreversible-spend
# approval).
package gpucap.policies.acme_long_blocks

import data.gpucap.lib
import rego.v1

max_days := 14

ns_per_day := 86400000000000

days(a) := (time.parse_rfc3339_ns(a.end) - time.parse_rfc3339_ns(a.start)) / ns_per_day

approval contains d if {
	some a in input.actions
	a.kind == "purchase_capacity_block"
	days(a) > max_days
	d := {
		"rule": "acme.long_block",
		"message": sprintf("capacity block %s runs %d days (%s), longer than %d days", [a.id, days(a), lib.dollars(a.cost), max_days]),
		"amount": days(a),
		"limit": max_days,
		"excess": days(a) - max_days,
		"approvers": ["platform team"],
		"fix": "get the platform team's sign-off, or split the demand so shorter blocks cover it",
	}
}
