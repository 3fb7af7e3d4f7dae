# Gate: the prices behind a plan are recent enough to act on.
#
# Why: spot prices move hourly and capacity-block prices daily; a plan that buys irreversible
# capacity on a week-old quote may be paying far more than today's price, or counting on offers
# that are gone. Quotes older than `budget.max_quote_age` (default 24h) deny the plan. Prices
# from the built-in snapshot are a warning even when fresh enough: they were never fetched for
# this account (no discounts, no regional gaps), so they are only good for a first look.
#
# Reads: input.quotes[].{offer, source, fetched_at}; data.now, data.max_quote_age_hours (the
# engine fills both: now with the current time, the age with 24 when the config has none).
package gpucap.policies.quote_age

import data.gpucap.lib
import rego.v1

ns_per_hour := 3600000000000

age_hours(q) := (time.parse_rfc3339_ns(data.now) - time.parse_rfc3339_ns(q.fetched_at)) / ns_per_hour

deny contains d if {
	limit := lib.max_quote_age_hours
	some q in input.quotes
	age := age_hours(q)
	age > limit
	d := {
		"rule": "quotes.age",
		"message": sprintf("quote for %s (%s, fetched %s) is %s h old, %s h over the %s h maximum", [q.offer, q.source, q.fetched_at, lib.hours(age), lib.hours(age - limit), lib.hours(limit)]),
		"offer": q.offer,
		"source": q.source,
		"amount": age,
		"limit": limit,
		"excess": age - limit,
		"fix": "re-run with live prices (gpucap prices --refresh, then plan again), or raise budget.max_quote_age",
	}
}

warn contains d if {
	some q in input.quotes
	q.source == "snapshot"
	d := {
		"rule": "quotes.snapshot",
		"message": sprintf("price of %s comes from the built-in snapshot of %s, not from the cloud", [q.offer, q.fetched_at]),
		"offer": q.offer,
		"fix": "enable the cloud's provider and credentials so gpucap fetches live prices",
	}
}
