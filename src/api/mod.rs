//! API types of the provider.
