# Gate: each team's expected cost stays within its budget in `budget.teams`.
#
# Why: teams are charged back for the capacity their campaigns use; one team's launch must not
# silently eat another's share. Once team budgets exist, spend that no budget covers (a team
# without an entry, or campaigns without a team) is a warning, so it does not go unnoticed.
#
# Reads: input.cost.by_team[].{team, expected}; data.teams (absent or empty: no team limits).
package gpucap.policies.budget_team

import data.gpucap.lib
import rego.v1

budgets := object.get(data, "teams", {})

deny contains d if {
	some t in input.cost.by_team
	limit := budgets[t.team]
	t.expected > limit
	excess := t.expected - limit
	d := {
		"rule": "budget.team",
		"message": sprintf("team %s: expected cost %s exceeds its budget %s by %s", [t.team, lib.dollars(t.expected), lib.dollars(limit), lib.dollars(excess)]),
		"team": t.team,
		"amount": t.expected,
		"limit": limit,
		"excess": excess,
		"fix": sprintf("raise budget.teams.%s, or shorten or drop the team's campaigns", [t.team]),
	}
}

warn contains d if {
	some t in input.cost.by_team
	limit := budgets[t.team]
	t.expected <= limit
	t.expected >= lib.near_limit_share * limit
	d := {
		"rule": "budget.team.near",
		"message": sprintf("team %s: expected cost %s is %s of its budget %s", [t.team, lib.dollars(t.expected), lib.percent(t.expected, limit), lib.dollars(limit)]),
		"team": t.team,
		"amount": t.expected,
		"limit": limit,
		"fix": sprintf("check the team's slip and upside scenarios fit, or raise budget.teams.%s", [t.team]),
	}
}

warn contains d if {
	count(budgets) > 0
	some t in input.cost.by_team
	is_string(t.team)
	not budgets[t.team]
	t.expected > 0
	d := {
		"rule": "budget.team.unbudgeted",
		"message": sprintf("team %s has no budget: its expected cost %s is not limited", [t.team, lib.dollars(t.expected)]),
		"team": t.team,
		"amount": t.expected,
		"fix": sprintf("add budget.teams.%s", [t.team]),
	}
}

warn contains d if {
	count(budgets) > 0
	some t in input.cost.by_team
	t.team == null
	t.expected > 0
	d := {
		"rule": "budget.team.unassigned",
		"message": sprintf("campaigns without a team cost %s, which no team budget covers", [lib.dollars(t.expected)]),
		"amount": t.expected,
		"fix": "set a team on every campaign in the calendars",
	}
}
