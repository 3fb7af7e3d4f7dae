# A regional committed use discount (CUD) for the gpucap `commit` action.
#
# IRREVERSIBLE. A commitment is a 1- or 3-year contract: it is billed every month for the whole
# term whether the resources are used or not, and it cannot be cancelled. `terraform destroy` only
# forgets it (the provider removes it from state; the contract runs on), so prevent_destroy keeps a
# refactor or a `-replace` from silently dropping a contract the company still pays for, and stops
# any plan that would destroy and re-buy it.
#
# GPUs: Compute Engine requires GPU commitments to be attached to reservations for the same GPUs
# (`existing_reservations`); the commitment then discounts the reservation, which would otherwise
# be billed at on-demand rates.

locals {
  labels = merge(var.labels, {
    gpucap-plan-id     = var.plan_id
    gpucap-fingerprint = substr(trimprefix(var.plan_fingerprint, "sha256:"), 0, 16)
    gpucap-action      = "commit"
    gpucap-module      = "gcp-commitment"
  })

  description = substr("gpucap plan ${var.plan_id} (${var.plan_fingerprint}); ${join(", ", [for k in sort(keys(local.labels)) : "${k}=${local.labels[k]}"])}", 0, 2048)
}

resource "google_compute_region_commitment" "this" {
  name        = var.name
  project     = var.project
  region      = var.region
  description = local.description

  plan       = var.term
  type       = var.type
  category   = "MACHINE"
  auto_renew = var.auto_renew

  existing_reservations = var.existing_reservations

  dynamic "resources" {
    for_each = var.resources
    content {
      type             = resources.value.type
      amount           = tostring(resources.value.amount)
      accelerator_type = resources.value.accelerator_type
    }
  }

  lifecycle {
    # Destroying only forgets state; the contract and its monthly bill run to the end of the term.
    prevent_destroy = true
  }
}
