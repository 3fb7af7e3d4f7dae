# A Compute Engine zonal reservation for the gpucap `reserve` action.
#
# Billing: a GPU reservation is charged as if its VMs were running (at on-demand or committed-use
# rates) from the moment it is created until it is deleted, used or not. It can be deleted at any
# time, so it has no prevent_destroy; gpucap's `release` action is a destroy. The provider's
# `delete_at_time` auto-expiry is left out on purpose: it is newer than the 6.0 floor in
# versions.tf. Commitments for GPUs must be attached to reservations (see gcp-commitment).

locals {
  labels = merge(var.labels, {
    gpucap-plan-id     = var.plan_id
    gpucap-fingerprint = substr(trimprefix(var.plan_fingerprint, "sha256:"), 0, 16)
    gpucap-action      = "reserve"
    gpucap-module      = "gcp-reservation"
  })

  # Reservations have no labels; the description (free text, at most 2048 characters) is where a
  # reviewer looking at the console finds which plan made it.
  description = substr("gpucap plan ${var.plan_id} (${var.plan_fingerprint}); ${join(", ", [for k in sort(keys(local.labels)) : "${k}=${local.labels[k]}"])}", 0, 2048)
}

resource "google_compute_reservation" "this" {
  name        = var.name
  project     = var.project
  zone        = var.zone
  description = local.description

  # Only VMs that target the reservation by name consume it: the capacity was bought for one
  # campaign's pool, and gpucap counts coverage per pool.
  specific_reservation_required = var.specific_reservation_required

  specific_reservation {
    count = var.instance_count

    instance_properties {
      machine_type     = var.machine_type
      min_cpu_platform = var.min_cpu_platform

      dynamic "guest_accelerators" {
        for_each = var.guest_accelerators
        content {
          accelerator_type  = guest_accelerators.value.accelerator_type
          accelerator_count = guest_accelerators.value.accelerator_count
        }
      }

      dynamic "local_ssds" {
        for_each = var.local_ssds
        content {
          disk_size_gb = local_ssds.value.disk_size_gb
          interface    = local_ssds.value.interface
        }
      }
    }
  }
}
