//! The container runtime seam: networks, node containers, the load balancer.
