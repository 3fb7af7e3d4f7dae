# Gate: the prices behind a plan are recent enough to act on.
#
# Why: spot prices move hourly and capacity-block prices daily; a plan that buys irreversible
# capacity on a week-old quote may be paying far more than today's price, or counting on offers
# that are gone. Fetched quotes (live, cached, imported) older than `budget.max_quote_age`
# (default 24h) deny the plan. Prices from the built-in snapshot are one warning instead, with
# their age: they were never fetched for this account (no discounts, no regional gaps, dated
# list prices), so an offline plan is good for a first look and a review, not for buying —
# and denying it would make every offline plan fail for a reason the user already chose.
#
# Contract prices (`[prices.discounts]`, `[[prices.offers]]` in gpucap.toml) are judged by the
# list price they are taken off (`list_source`, with its time as `fetched_at`): a discount on a
# week-old live quote is as stale as the quote. A private offer at a stated rate has no list
# price and does not age.
#
# Reads: input.quotes[].{offer, source, list_source, fetched_at}; data.now, data.max_quote_age_hours (the
# engine fills both: now with the current time, the age with 24 when the config has none).
package gpucap.policies.quote_age

import data.gpucap.lib
import rego.v1

ns_per_hour := 3600000000000

age_hours(q) := (time.parse_rfc3339_ns(data.now) - time.parse_rfc3339_ns(q.fetched_at)) / ns_per_hour

# The source whose age counts: the quote's own, or for a contract price the list's.
priced_from(q) := q.source if q.source != "contract"

priced_from(q) := q.list_source if {
	q.source == "contract"
	q.list_source
}

deny contains d if {
	limit := lib.max_quote_age_hours
	some q in input.quotes
	priced_from(q) != "snapshot"
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

snapshot_offers := sort([q.offer | some q in input.quotes; priced_from(q) == "snapshot"])

warn contains d if {
	count(snapshot_offers) > 0
	dates := sort({q.fetched_at | some q in input.quotes; priced_from(q) == "snapshot"})
	oldest := [age_hours(q) | some q in input.quotes; priced_from(q) == "snapshot"]
	d := {
		"rule": "quotes.snapshot",
		"message": sprintf("%d price(s) come from the built-in snapshot of %s (up to %s h old), not from the cloud: %s", [count(snapshot_offers), concat(", ", dates), lib.hours(max(oldest)), concat(", ", snapshot_offers)]),
		"offers": snapshot_offers,
		"amount": max(oldest),
		"fix": "enable the cloud's provider and credentials so gpucap fetches live prices, then plan again before buying",
	}
}
