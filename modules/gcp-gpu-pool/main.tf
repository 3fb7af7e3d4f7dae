# A GPU pool for the gpucap `scale-pool` action on GCP: an instance template and a zonal managed
# instance group (MIG), plus a Dynamic Workload Scheduler resize request in flex-start mode.
#
# * standard: on-demand VMs; with reservation_names they run only in those reservations
#   (SPECIFIC_RESERVATION), which is how the capacity bought by gcp-reservation or
#   gcp-future-reservation gets used by this campaign's pool and no other.
# * spot: preemptible VMs for the plan's flex demand. Reservations never apply to spot VMs.
# * flex-start: the group starts empty and a resize request asks DWS for `resize_by` VMs at once.
#   The request waits in a queue until all of them can be provisioned together, then they run for
#   `run_duration_seconds` and are deleted. Only the resize request adds VMs, so Terraform does not
#   manage that group's target size.

locals {
  flex = var.provisioning == "flex-start"
  spot = var.provisioning == "spot"

  labels = merge(var.labels, {
    gpucap-plan-id     = var.plan_id
    gpucap-fingerprint = substr(trimprefix(var.plan_fingerprint, "sha256:"), 0, 16)
    gpucap-action      = "scale-pool"
    gpucap-module      = "gcp-gpu-pool"
    gpucap-pool        = var.name
  })

  reservation_affinity = (
    local.spot || local.flex ? "NO_RESERVATION" :
    length(var.reservation_names) > 0 ? "SPECIFIC_RESERVATION" : "ANY_RESERVATION"
  )

  # Exactly one of the two group resources exists.
  instance_group_manager = one(concat(google_compute_instance_group_manager.this, google_compute_instance_group_manager.flex))
}

resource "google_compute_instance_template" "this" {
  # name_prefix + create_before_destroy: a changed template is created before the old one is
  # deleted, so the group always points at an existing template.
  name_prefix  = "${var.name}-"
  project      = var.project
  description  = "gpucap GPU pool ${var.name} (plan ${var.plan_id}, ${var.plan_fingerprint})"
  machine_type = var.machine_type
  labels       = local.labels
  metadata     = var.metadata

  disk {
    source_image = var.source_image
    boot         = true
    auto_delete  = true
    disk_type    = var.boot_disk.type
    disk_size_gb = var.boot_disk.size_gb
  }

  network_interface {
    network    = var.network
    subnetwork = var.subnetwork
  }

  dynamic "guest_accelerator" {
    for_each = var.guest_accelerators
    content {
      type  = guest_accelerator.value.type
      count = guest_accelerator.value.count
    }
  }

  scheduling {
    # GPU VMs cannot live-migrate: host maintenance stops them.
    on_host_maintenance = "TERMINATE"
    provisioning_model  = local.spot ? "SPOT" : "STANDARD"
    preemptible         = local.spot
    # Spot and flex-start VMs must not be restarted by Compute Engine; the group (spot) or the
    # resize request (flex-start) owns their lifecycle.
    automatic_restart           = !(local.spot || local.flex)
    instance_termination_action = local.spot ? var.spot_termination_action : null
  }

  reservation_affinity {
    type = local.reservation_affinity

    dynamic "specific_reservation" {
      for_each = local.reservation_affinity == "SPECIFIC_RESERVATION" ? [var.reservation_names] : []
      content {
        key    = "compute.googleapis.com/reservation-name"
        values = specific_reservation.value
      }
    }
  }

  service_account {
    email  = var.service_account_email
    scopes = ["cloud-platform"]
  }

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = var.network != null || var.subnetwork != null
      error_message = "Give a network or a subnetwork."
    }

    precondition {
      condition     = length(var.reservation_names) == 0 || var.provisioning == "standard"
      error_message = "Only standard VMs consume reservations; spot and flex-start pools must leave reservation_names empty."
    }

    precondition {
      condition     = local.flex == (var.flex_start != null)
      error_message = "Give flex_start exactly when provisioning is flex-start."
    }

    precondition {
      condition     = !local.flex || var.target_size == 0
      error_message = "A flex-start group starts empty (target_size 0); the resize request adds its VMs."
    }
  }
}

# Standard and spot pools: Terraform owns the target size.
resource "google_compute_instance_group_manager" "this" {
  count = local.flex ? 0 : 1

  name               = var.name
  project            = var.project
  zone               = var.zone
  base_instance_name = var.name
  description        = "gpucap GPU pool ${var.name} (plan ${var.plan_id})"
  target_size        = var.target_size

  version {
    instance_template = google_compute_instance_template.this.self_link
  }

  # A new template (a new image, say) must not restart training VMs in the middle of a run: new VMs
  # get it, running ones keep theirs until they are recreated for another reason.
  update_policy {
    type           = "OPPORTUNISTIC"
    minimal_action = "REPLACE"
  }

  # Capacity may take a long time to arrive; gpucap watches the group after the apply.
  wait_for_instances = false
}

# Flex-start pools: the resize request raises the target size when DWS provisions the VMs (and it
# drops again when their run time ends). Terraform must not reset it to zero, which would delete
# them, hence ignore_changes.
resource "google_compute_instance_group_manager" "flex" {
  count = local.flex ? 1 : 0

  name               = var.name
  project            = var.project
  zone               = var.zone
  base_instance_name = var.name
  description        = "gpucap GPU pool ${var.name} (plan ${var.plan_id}, flex-start)"
  target_size        = 0

  version {
    instance_template = google_compute_instance_template.this.self_link
  }

  # A VM that fails to come up must not be recreated outside the resize request.
  instance_lifecycle_policy {
    default_action_on_failure = "DO_NOTHING"
  }

  update_policy {
    type           = "OPPORTUNISTIC"
    minimal_action = "REPLACE"
  }

  wait_for_instances = false

  lifecycle {
    ignore_changes = [target_size]
  }
}

resource "google_compute_resize_request" "this" {
  count = local.flex ? 1 : 0

  name                   = var.flex_start.request_name
  project                = var.project
  zone                   = var.zone
  instance_group_manager = google_compute_instance_group_manager.flex[0].name
  description            = "gpucap plan ${var.plan_id} (${var.plan_fingerprint})"
  resize_by              = var.flex_start.resize_by

  requested_run_duration {
    seconds = tostring(var.flex_start.run_duration_seconds)
  }
}
