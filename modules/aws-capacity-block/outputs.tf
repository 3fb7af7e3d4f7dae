output "id" {
  description = "Capacity reservation id (`cr-...`) of the block; pass it to the aws-gpu-pool module's `capacity_block_reservation_id`."
  value       = aws_ec2_capacity_block_reservation.this.id
}

output "arn" {
  description = "ARN of the capacity block reservation."
  value       = aws_ec2_capacity_block_reservation.this.arn
}

output "capacity_block_offering_id" {
  description = "Offering that was bought; gpucap pins it into `capacity_block_offering_id` after the purchase."
  value       = local.offering_id
}

output "instance_type" {
  description = "Instance type of the block."
  value       = aws_ec2_capacity_block_reservation.this.instance_type
}

output "instance_count" {
  description = "Instances in the block."
  value       = aws_ec2_capacity_block_reservation.this.instance_count
}

output "availability_zone" {
  description = "Zone of the block; the pool must launch into a subnet of this zone."
  value       = aws_ec2_capacity_block_reservation.this.availability_zone
}

output "start_date" {
  description = "When the block starts (RFC 3339)."
  value       = aws_ec2_capacity_block_reservation.this.start_date
}

output "end_date" {
  description = "When the block ends (RFC 3339)."
  value       = aws_ec2_capacity_block_reservation.this.end_date
}

output "termination_starts_at" {
  description = "30 minutes before end_date: EC2 terminates instances still running in the block from this time. Checkpoint and scale in before it."
  value       = timeadd(aws_ec2_capacity_block_reservation.this.end_date, "-30m")
}

output "upfront_fee_usd" {
  description = "Upfront fee of the offering looked up at plan time (null when the offering id was pinned)."
  value       = local.upfront_fee
}

output "plan_id" {
  description = "gpucap plan id this block was bought for."
  value       = var.plan_id
}
