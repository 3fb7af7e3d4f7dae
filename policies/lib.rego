# Helpers shared by the built-in budget gates (and open to user policies: `import data.gpucap.lib`).
#
# This package is not a gate: the engine only collects `deny`, `warn` and `approval` from
# packages under `gpucap.policies`. Keeping formatting here means every gate prints money the
# same way, so messages can be compared exactly in the policy tests.
package gpucap.lib

import rego.v1

# `$1,234,567`: whole dollars with thousands separators. Cents would be noise at plan scale
# (the exact amounts are in the decision's `amount`, `limit` and `excess` fields).
dollars(x) := concat("", ["$", group(format_int(round(x), 10))]) if round(x) >= 0

dollars(x) := concat("", ["-$", group(format_int(0 - round(x), 10))]) if round(x) < 0

# "1234567" -> "1,234,567". The first group holds 1-3 digits, every later group exactly 3.
group(digits) := concat(",", array.concat([substring(digits, 0, head)], tail)) if {
	n := count(digits)
	head := first_group_length(n)
	tail := [substring(digits, i, 3) |
		some i in numbers.range(head, n)
		i < n
		0 == (i - head) % 3
	]
}

first_group_length(n) := 3 if n % 3 == 0

first_group_length(n) := n % 3 if n % 3 != 0

# `93.2 %` of a limit, always one decimal (`100.0 %`). Built from whole tenths, because
# sprintf's `%.1f` prints a whole number without its decimal.
percent(part, whole) := concat("", [format_int(tenths / 10, 10), ".", format_int(tenths % 10, 10), " %"]) if {
	tenths := round((1000 * part) / whole)
}

# Hours as a short number: `36` or `36.5`.
hours(h) := format_int(h, 10) if h == round(h)

hours(h) := sprintf("%.1f", [h]) if h != round(h)

# Campaigns of the plan by name.
campaigns := {c.name: c | some c in input.campaigns}

# The oldest acceptable quote, in hours. The engine always fills `max_quote_age_hours` (default
# 24), so this is only a guard for policies evaluated by other Rego engines.
max_quote_age_hours := object.get(data, "max_quote_age_hours", 24)

# Warn when spend reaches this share of a limit: close enough that a slipped campaign or a price
# change tips it over.
near_limit_share := 0.9
