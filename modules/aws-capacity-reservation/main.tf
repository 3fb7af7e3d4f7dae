# An On-Demand Capacity Reservation (ODCR) for the gpucap `reserve` action.
#
# Billing: an ODCR is charged at the on-demand rate for every reserved instance, used or not, from
# the moment it becomes active until it is cancelled or reaches `end_date`. It buys certainty of
# capacity, not a discount. Unlike a capacity block it can be released at any time, so this
# resource deliberately has no prevent_destroy: `gpucap`'s `release` action is a destroy.

locals {
  tags = merge(var.tags, {
    Name                      = var.name
    "gpucap:plan-id"          = var.plan_id
    "gpucap:plan-fingerprint" = var.plan_fingerprint
    "gpucap:action"           = "reserve"
    "gpucap:module"           = "aws-capacity-reservation"
  })
}

resource "aws_ec2_capacity_reservation" "this" {
  instance_type     = var.instance_type
  instance_platform = var.instance_platform
  availability_zone = var.availability_zone
  instance_count    = var.instance_count
  tenancy           = var.tenancy
  ebs_optimized     = var.ebs_optimized

  # Targeted by default: only the gpucap pool that names this reservation can consume it. With
  # `open`, any matching instance in the account (a notebook someone started by hand) would eat
  # capacity the plan paid to hold for a campaign, and the plan's coverage figures would be wrong.
  instance_match_criteria = var.instance_match_criteria

  # `limited` with an end date means a forgotten reservation stops billing by itself; EC2 cancels
  # it within an hour of `end_date`.
  end_date_type = var.end_date == null ? "unlimited" : "limited"
  end_date      = var.end_date

  placement_group_arn = var.placement_group_arn

  tags = local.tags
}

# A warning, not an error: once the reservation exists and its end date passes, plans of the root
# module must keep working so that gpucap can remove it.
check "end_date_in_future" {
  assert {
    condition     = var.end_date == null || timecmp(coalesce(var.end_date, "1970-01-01T00:00:00Z"), plantimestamp()) > 0
    error_message = "The end_date is in the past: the reservation has expired (or the plan is stale); re-run `gpucap plan`."
  }
}
