terraform {
  # 1.5: `optional()` object attributes, preconditions and `check` blocks.
  required_version = ">= 1.5.0"

  required_providers {
    # google_compute_future_reservation exists only in the beta provider (first in 6.37.0).
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.37.0, < 8.0.0"
    }
  }
}
