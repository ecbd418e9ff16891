//! What the manager's HTTP servers share: listen addresses in the Go form of CAPD's flags, and
//! TLS (the version floor, the diagnostics endpoint's self-signed certificate, the listener that
//! completes handshakes). The manager's diagnostics endpoint and the webhook server
//! (`crate::webhooks`) both build on it; neither imports the other's.

pub mod listen;
pub mod tls;

pub use listen::{ListenAddr, ListenError};
pub use tls::{TlsListener, TlsMinVersion};
