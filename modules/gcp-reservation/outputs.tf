output "id" {
  description = "Reservation id (`projects/{project}/zones/{zone}/reservations/{name}`)."
  value       = google_compute_reservation.this.id
}

output "name" {
  description = "Reservation name; pass it to the gcp-gpu-pool module's `reservation_names`."
  value       = google_compute_reservation.this.name
}

output "self_link" {
  description = "URI of the reservation (what gcp-commitment's `existing_reservations` takes)."
  value       = google_compute_reservation.this.self_link
}

output "zone" {
  description = "Zone the capacity is held in; the pool must run in this zone."
  value       = google_compute_reservation.this.zone
}

output "instance_count" {
  description = "VMs reserved (billed as if running, used or not)."
  value       = var.instance_count
}

output "labels" {
  description = "The labels recorded in the description; give the same to the pool's VMs."
  value       = local.labels
}

output "plan_id" {
  description = "gpucap plan id this reservation was made for."
  value       = var.plan_id
}
