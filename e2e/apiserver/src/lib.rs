//! A test-only Kubernetes API server.
