# A Capacity Block for ML for the gpucap `purchase-block` action: GPU instances reserved for a fixed
# window, paid in full up front.
#
# IRREVERSIBLE. The upfront fee is charged at purchase and a block cannot be cancelled, resized or
# refunded. `terraform destroy` only forgets the block (the provider just removes it from state);
# the money is spent either way. prevent_destroy is there so that a refactor, a renamed module or
# a `-replace` cannot silently lose track of capacity the company has paid for, and so that no plan
# that shows a destroy of a block (which would usually come with a re-purchase) gets applied.
#
# End of the block: EC2 starts terminating instances still running in the block 30 minutes before
# `end_date` (blocks end at 11:30 UTC). The aws-gpu-pool module scales its group in before that;
# after `end_date` the reservation expires on its own and nothing more is billed.

locals {
  tags = merge(var.tags, {
    Name                      = var.name
    "gpucap:plan-id"          = var.plan_id
    "gpucap:plan-fingerprint" = var.plan_fingerprint
    "gpucap:action"           = "purchase-block"
    "gpucap:module"           = "aws-capacity-block"
  })

  lookup_offering = var.capacity_block_offering_id == null
  offering        = one(data.aws_ec2_capacity_block_offering.this)
  offering_id     = local.lookup_offering ? try(local.offering.capacity_block_offering_id, null) : var.capacity_block_offering_id
  upfront_fee     = local.lookup_offering ? try(tonumber(local.offering.upfront_fee), null) : null
}

# Offerings are first come, first served and change minute by minute, which is why the lookup
# runs at plan time, right before the purchase, and the price is checked against the plan below.
data "aws_ec2_capacity_block_offering" "this" {
  count = local.lookup_offering ? 1 : 0

  instance_type           = var.instance_type
  instance_count          = var.instance_count
  capacity_duration_hours = var.capacity_duration_hours
  start_date_range        = var.start_date_range
  end_date_range          = var.end_date_range
}

resource "aws_ec2_capacity_block_reservation" "this" {
  capacity_block_offering_id = local.offering_id
  instance_platform          = var.instance_platform

  tags = local.tags

  lifecycle {
    # Destroying only forgets state; the block stays bought and paid for (see the top of the file).
    prevent_destroy = true

    # Once bought, a later lookup may return a different offering (or none). A changed id must
    # never turn into a replacement, i.e. a second purchase.
    ignore_changes = [capacity_block_offering_id]

    precondition {
      condition     = !local.lookup_offering || (local.upfront_fee != null && local.upfront_fee <= var.max_upfront_fee_usd)
      error_message = "The capacity block offering found now costs more than the approved plan allows (max_upfront_fee_usd); re-run `gpucap plan` to re-price."
    }

    precondition {
      condition     = !local.lookup_offering || try(local.offering.currency_code, "USD") == "USD"
      error_message = "The capacity block offering is not priced in USD; gpucap budgets are in USD."
    }

    precondition {
      condition     = !local.lookup_offering || length(var.allowed_availability_zones) == 0 || contains(var.allowed_availability_zones, try(local.offering.availability_zone, ""))
      error_message = "The capacity block offering found is in a zone outside allowed_availability_zones (where the pool has no subnets)."
    }
  }
}

check "date_range_order" {
  assert {
    condition     = var.start_date_range == null || var.end_date_range == null || timecmp(coalesce(var.end_date_range, "9999-12-31T23:59:59Z"), coalesce(var.start_date_range, "0001-01-01T00:00:00Z")) > 0
    error_message = "The end_date_range is not after start_date_range; no offering can match."
  }
}
