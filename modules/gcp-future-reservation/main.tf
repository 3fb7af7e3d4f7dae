# A future reservation in calendar mode (Dynamic Workload Scheduler) for the gpucap
# `purchase-block` action on GCP: a fixed number of GPU VMs for a fixed window of 1 to 90 days.
#
# IRREVERSIBLE ONCE CLOSE. A submitted calendar-mode request can be cancelled only while its start
# is at least 30 days away (or within 24 hours of approval, at least four days ahead); after that
# it cannot be cancelled, deleted or modified, and an approved one is billed for the whole window
# (https://cloud.google.com/compute/docs/instances/delete-future-reservations-calendar-mode, read
# 2026-11-25). Terraform has no cancel: `gcloud compute future-reservations cancel`, or
# `gpucap release` for a block gpucap made. `terraform destroy` cannot cancel it (Compute Engine
# deletes a request only once it is cancelled, declined or over): it would only forget (or fail on)
# the request; prevent_destroy keeps a refactor or a `-replace` from losing track of it, and
# blocks any plan that would destroy and re-request it (a second window on top of the first).
#
# At start_time Compute Engine creates the reservation `reservation_name` holding the capacity;
# the gcp-gpu-pool module targets it by that name. At end_time the reservation and whatever still
# runs on it are deleted (auto_delete_auto_created_reservations).

locals {
  labels = merge(var.labels, {
    gpucap-plan-id     = var.plan_id
    gpucap-fingerprint = substr(trimprefix(var.plan_fingerprint, "sha256:"), 0, 16)
    gpucap-action      = "purchase-block"
    gpucap-module      = "gcp-future-reservation"
  })

  description = substr("gpucap plan ${var.plan_id} (${var.plan_fingerprint}); ${join(", ", [for k in sort(keys(local.labels)) : "${k}=${local.labels[k]}"])}", 0, 2048)
}

resource "google_compute_future_reservation" "this" {
  provider = google-beta

  name        = var.name
  project     = var.project
  zone        = var.zone
  description = local.description

  reservation_mode = "CALENDAR"
  planning_status  = var.planning_status
  deployment_type  = var.deployment_type
  reservation_name = var.reservation_name

  # Only the campaign's pool, which names the reservation, may consume the capacity.
  specific_reservation_required = true

  # Give the capacity back at the end of the window instead of keeping a reservation that would be
  # billed at on-demand rates from then on.
  auto_delete_auto_created_reservations = true

  share_settings {
    share_type = "LOCAL"
  }

  time_window {
    start_time = var.start_time
    end_time   = var.end_time
  }

  specific_sku_properties {
    # The API takes the count as an int64 string.
    total_count = tostring(var.instance_count)

    instance_properties {
      machine_type = var.machine_type
    }
  }

  lifecycle {
    # Destroying does not cancel: it would only forget the request, or fail (cancel it with
    # gcloud or `gpucap release` while the start is at least 30 days away).
    prevent_destroy = true

    precondition {
      condition     = timecmp(var.end_time, var.start_time) > 0
      error_message = "The end_time must be after start_time."
    }

    precondition {
      condition     = timecmp(var.end_time, timeadd(var.start_time, "24h")) >= 0 && timecmp(var.end_time, timeadd(var.start_time, "2160h")) <= 0
      error_message = "A calendar-mode window lasts 1 to 90 days."
    }
  }
}
