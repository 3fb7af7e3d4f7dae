terraform {
  # 1.5: `optional()` object attributes, preconditions and `check` blocks.
  required_version = ">= 1.5.0"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.x and 7.x carry every argument used here.
      version = ">= 6.0.0, < 8.0.0"
    }
  }
}
