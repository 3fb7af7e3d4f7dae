# Gate: no plan that depends on a quota increase not yet granted.
#
# Why: a plan that covers its demand only with more quota than the account holds cannot be
# carried out as it stands: the on-demand or spot runs it counts on would fail to launch. The
# plan lists what to ask for (how much, by when, why) as quota_increases; once the cloud grants
# it, set the new quota in `[quotas]` (or let gpucap read it) and plan again. Increases that
# would only save money are a warning: the plan keeps within the quotas without them.
#
# Reads: input.quota_increases[].{id, cloud, region, quota, title, unit, current, requested,
# increase, request_by, needed, saving, reason}. No data keys.
package gpucap.policies.quota_increase

import data.gpucap.lib
import rego.v1

deny contains d if {
	some q in input.quota_increases
	q.needed == true
	d := {
		"rule": "quota.increase_needed",
		"message": sprintf("the plan needs %s %s in %s %s raised from %d to %d %s (ask by %s): %s", [q.cloud, q.title, q.region, q.quota, q.current, q.requested, q.unit, q.request_by, q.reason]),
		"action": q.id,
		"amount": q.requested,
		"limit": q.current,
		"excess": q.increase,
		"fix": sprintf("request the increase (%s %s in %s), then set the granted value in [quotas] limits.\"%s/%s/%s\" and plan again", [q.cloud, q.quota, q.region, q.cloud, q.region, q.quota]),
	}
}

warn contains d if {
	some q in input.quota_increases
	q.needed == false
	d := {
		"rule": "quota.increase_saves",
		"message": sprintf("raising %s %s in %s from %d to %d %s would save %s", [q.cloud, q.title, q.region, q.current, q.requested, q.unit, lib.dollars(q.saving)]),
		"action": q.id,
		"amount": q.saving,
		"fix": sprintf("request the increase by %s, then set it in [quotas] and plan again", [q.request_by]),
	}
}
