output "id" {
  description = "Future reservation id (`projects/{project}/zones/{zone}/futureReservations/{name}`)."
  value       = google_compute_future_reservation.this.id
}

output "self_link" {
  description = "URI of the future reservation."
  value       = google_compute_future_reservation.this.self_link
}

output "reservation_name" {
  description = "Reservation created at start_time; pass it to the gcp-gpu-pool module's `reservation_names`."
  value       = var.reservation_name
}

output "zone" {
  description = "Zone of the capacity; the pool must run in this zone."
  value       = var.zone
}

output "instance_count" {
  description = "GPU VMs requested."
  value       = var.instance_count
}

output "start_time" {
  description = "Start of the window (RFC 3339)."
  value       = var.start_time
}

output "end_time" {
  description = "End of the window (RFC 3339); VMs still running on the reservation are deleted then."
  value       = var.end_time
}

output "procurement_status" {
  description = "Where Google's review stands (e.g. PENDING_APPROVAL, APPROVED, DECLINED, FULFILLED), or null before it is known."
  value       = try(google_compute_future_reservation.this.status[0].procurement_status, null)
}

output "plan_id" {
  description = "gpucap plan id this request was made for."
  value       = var.plan_id
}
