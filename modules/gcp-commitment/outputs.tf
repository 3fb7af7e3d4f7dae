output "id" {
  description = "Commitment id (`projects/{project}/regions/{region}/commitments/{name}`)."
  value       = google_compute_region_commitment.this.id
}

output "commitment_id" {
  description = "Numeric id of the commitment."
  value       = google_compute_region_commitment.this.commitment_id
}

output "self_link" {
  description = "URI of the commitment."
  value       = google_compute_region_commitment.this.self_link
}

output "term" {
  description = "TWELVE_MONTH or THIRTY_SIX_MONTH."
  value       = google_compute_region_commitment.this.plan
}

output "start_timestamp" {
  description = "When the commitment starts (RFC 3339)."
  value       = google_compute_region_commitment.this.start_timestamp
}

output "end_timestamp" {
  description = "When the commitment ends (RFC 3339); billing runs until then."
  value       = google_compute_region_commitment.this.end_timestamp
}

output "status" {
  description = "Status of the commitment (e.g. ACTIVE, NOT_YET_ACTIVE, EXPIRED)."
  value       = google_compute_region_commitment.this.status
}

output "plan_id" {
  description = "gpucap plan id this commitment was bought for."
  value       = var.plan_id
}
