//! What the AWS provider prices and where it sends requests. The doc comments are the user
//! documentation of the `[providers.aws]` settings.

use crate::retry::{self, RetryPolicy};

/// Environment variable that points every AWS client gpucap makes at another endpoint
/// (a local emulator, a VPC endpoint).
pub const ENDPOINT_ENV: &str = "GPUCAP_AWS_ENDPOINT_URL";
/// Environment variable that points only the Price List client elsewhere.
pub const PRICING_ENDPOINT_ENV: &str = "GPUCAP_AWS_PRICING_ENDPOINT_URL";

/// Settings of the AWS provider.
#[derive(Debug, Clone)]
pub struct AwsConfig {
    /// Regions to price (`us-east-1`, …).
    pub regions: Vec<String>,
    /// Instance types to price; empty means every GPU/Neuron type `DescribeInstanceTypes`
    /// lists in the region.
    pub instance_types: Vec<String>,
    /// Endpoint for EC2 and Pricing instead of AWS's (also `GPUCAP_AWS_ENDPOINT_URL`).
    pub endpoint_url: Option<String>,
    /// Endpoint for the Price List API only (also `GPUCAP_AWS_PRICING_ENDPOINT_URL`).
    pub pricing_endpoint_url: Option<String>,
    /// Region whose Price List endpoint is asked; the API exists only in us-east-1,
    /// eu-central-1 and ap-south-1, and any of them prices every region.
    pub pricing_region: String,
    /// Capacity Blocks to look for: the block sizes (instances) and lengths (hours) asked of
    /// `DescribeCapacityBlockOfferings` for each instance type that sells them. Empty: none.
    pub capacity_blocks: Vec<CapacityBlockQuery>,
    /// Target capacity (instances) to ask spot placement scores for; `None` skips them.
    pub placement_target_capacity: Option<u32>,
    /// Explicit credentials instead of the default chain (CI, tests against emulators).
    pub static_credentials: Option<StaticCredentials>,
    pub retry: RetryPolicy,
}

/// One capacity block shape to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityBlockQuery {
    pub instance_count: u32,
    pub duration_hours: u32,
}

/// An access key pair.
#[derive(Clone)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Instance families that AWS sells as Capacity Blocks for ML (the API rejects others).
pub const CAPACITY_BLOCK_FAMILIES: &[&str] = &[
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6e-gb200",
    "trn1",
    "trn2",
];

impl Default for AwsConfig {
    fn default() -> Self {
        AwsConfig {
            regions: vec!["us-east-1".into()],
            instance_types: Vec::new(),
            endpoint_url: None,
            pricing_endpoint_url: None,
            pricing_region: "us-east-1".into(),
            // One instance for a day: the smallest block, which every family sells.
            capacity_blocks: vec![CapacityBlockQuery {
                instance_count: 1,
                duration_hours: 24,
            }],
            placement_target_capacity: Some(1),
            static_credentials: None,
            retry: retry::DEFAULT_POLICY,
        }
    }
}

impl AwsConfig {
    /// Applies `GPUCAP_AWS_ENDPOINT_URL` and `GPUCAP_AWS_PRICING_ENDPOINT_URL` when set.
    pub fn with_env_overrides(mut self) -> Self {
        if let Some(url) = std::env::var(ENDPOINT_ENV).ok().filter(|s| !s.is_empty()) {
            self.endpoint_url = Some(url);
        }
        if let Some(url) = std::env::var(PRICING_ENDPOINT_ENV)
            .ok()
            .filter(|s| !s.is_empty())
        {
            self.pricing_endpoint_url = Some(url);
        }
        self
    }

    /// Whether `DescribeCapacityBlockOfferings` is worth asking about an instance type.
    pub fn sells_capacity_blocks(instance_type: &str) -> bool {
        instance_type
            .split('.')
            .next()
            .is_some_and(|family| CAPACITY_BLOCK_FAMILIES.contains(&family))
    }
}
