output "id" {
  description = "Capacity reservation id (`cr-...`); pass it to the aws-gpu-pool module's `capacity_reservation_ids`."
  value       = aws_ec2_capacity_reservation.this.id
}

output "arn" {
  description = "ARN of the capacity reservation."
  value       = aws_ec2_capacity_reservation.this.arn
}

output "instance_type" {
  description = "Reserved instance type."
  value       = aws_ec2_capacity_reservation.this.instance_type
}

output "instance_count" {
  description = "Number of instances reserved (billed at the on-demand rate whether used or not)."
  value       = aws_ec2_capacity_reservation.this.instance_count
}

output "availability_zone" {
  description = "Zone the capacity is held in; the pool must launch into a subnet of this zone."
  value       = aws_ec2_capacity_reservation.this.availability_zone
}

output "end_date" {
  description = "When the reservation expires (RFC 3339), or null when it runs until released."
  value       = var.end_date
}

output "instance_match_criteria" {
  description = "`targeted` or `open`."
  value       = aws_ec2_capacity_reservation.this.instance_match_criteria
}

output "owner_id" {
  description = "AWS account that owns the reservation."
  value       = aws_ec2_capacity_reservation.this.owner_id
}

output "plan_id" {
  description = "gpucap plan id this reservation was made for."
  value       = var.plan_id
}
