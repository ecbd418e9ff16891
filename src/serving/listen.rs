//! Listen addresses in the Go form the CAPD flags use (`:9440`, `127.0.0.1:8443`, `[::1]:8443`, `0`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::TcpListener;

/// Why an address flag value was rejected, or binding it failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The value is not `host:port`, `:port` or `0`.
    #[error("invalid listen address {0:?}: expected host:port, :port, or 0 to disable")]
    Malformed(String),
    /// The port is not a number from 0 to 65535.
    #[error("invalid listen address {0:?}: the port must be a number from 0 to 65535")]
    BadPort(String),
    /// Binding the socket failed.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address as given on the command line.
        address: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// A TCP listen address, or "disabled" (the Go value `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// The server is not started.
    Disabled,
    /// Listen on `host:port`; no host means every interface.
    Tcp {
        /// Host name or IP literal (without brackets); `None` for every interface.
        host: Option<String>,
        /// TCP port; 0 picks a free one.
        port: u16,
    },
}

impl ListenAddr {
    /// Binds the address. Every-interface addresses try IPv6 (dual stack) first, then IPv4, so the
    /// server works in IPv4-only, IPv6-only and dual-stack pods alike.
    pub async fn bind(&self) -> Result<Option<TcpListener>, ListenError> {
        let bind_error = |source| ListenError::Bind {
            address: self.to_string(),
            source,
        };
        match self {
            ListenAddr::Disabled => Ok(None),
            ListenAddr::Tcp { host: None, port } => {
                let any_v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, *port));
                match TcpListener::bind(any_v6).await {
                    Ok(listener) => Ok(Some(listener)),
                    Err(_) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, *port)))
                        .await
                        .map(Some)
                        .map_err(bind_error),
                }
            }
            ListenAddr::Tcp {
                host: Some(host),
                port,
            } => TcpListener::bind((host.as_str(), *port))
                .await
                .map(Some)
                .map_err(bind_error),
        }
    }
}

impl FromStr for ListenAddr {
    type Err = ListenError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if value == "0" {
            return Ok(ListenAddr::Disabled);
        }
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| ListenError::Malformed(value.to_owned()))?;
        let port: u16 = port
            .parse()
            .map_err(|_| ListenError::BadPort(value.to_owned()))?;
        let host = if let Some(inner) = host.strip_prefix('[') {
            let literal = inner
                .strip_suffix(']')
                .ok_or_else(|| ListenError::Malformed(value.to_owned()))?;
            literal
                .parse::<Ipv6Addr>()
                .map_err(|_| ListenError::Malformed(value.to_owned()))?;
            Some(literal.to_owned())
        } else if host.contains(':') || host.contains(char::is_whitespace) {
            return Err(ListenError::Malformed(value.to_owned()));
        } else if host.is_empty() {
            None
        } else {
            Some(host.to_owned())
        };
        Ok(ListenAddr::Tcp { host, port })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Disabled => f.write_str("0"),
            ListenAddr::Tcp { host: None, port } => write!(f, ":{port}"),
            ListenAddr::Tcp {
                host: Some(host),
                port,
            } if host.contains(':') => write!(f, "[{host}]:{port}"),
            ListenAddr::Tcp {
                host: Some(host),
                port,
            } => write!(f, "{host}:{port}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: Option<&str>, port: u16) -> ListenAddr {
        ListenAddr::Tcp {
            host: host.map(str::to_owned),
            port,
        }
    }

    #[test]
    fn parses_go_listen_addresses() {
        assert_eq!(":9440".parse::<ListenAddr>().unwrap(), tcp(None, 9440));
        assert_eq!(
            "127.0.0.1:8443".parse::<ListenAddr>().unwrap(),
            tcp(Some("127.0.0.1"), 8443)
        );
        assert_eq!(
            "[::1]:8443".parse::<ListenAddr>().unwrap(),
            tcp(Some("::1"), 8443)
        );
        assert_eq!(
            "localhost:0".parse::<ListenAddr>().unwrap(),
            tcp(Some("localhost"), 0)
        );
        assert_eq!("0".parse::<ListenAddr>().unwrap(), ListenAddr::Disabled);
    }

    #[test]
    fn rejects_addresses_that_cannot_be_bound() {
        for bad in [
            "9440",
            "::1:8443",
            "[::1:8443",
            "[nothost]:1",
            "host:port",
            ":70000",
            "a b:1",
        ] {
            assert!(
                bad.parse::<ListenAddr>().is_err(),
                "{bad} should be rejected"
            );
        }
        let message = ":http".parse::<ListenAddr>().unwrap_err().to_string();
        assert_eq!(
            message,
            "invalid listen address \":http\": the port must be a number from 0 to 65535"
        );
    }

    #[test]
    fn display_is_the_flag_form() {
        for text in [":9440", "127.0.0.1:8443", "[::1]:8443", "0"] {
            assert_eq!(text.parse::<ListenAddr>().unwrap().to_string(), text);
        }
    }

    #[tokio::test]
    async fn binds_loopback_and_any_interface_and_skips_disabled() {
        let loopback = tcp(Some("127.0.0.1"), 0).bind().await.unwrap().unwrap();
        assert!(loopback.local_addr().unwrap().ip().is_loopback());
        let any = tcp(None, 0).bind().await.unwrap().unwrap();
        assert!(any.local_addr().unwrap().ip().is_unspecified());
        assert!(ListenAddr::Disabled.bind().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_port_in_use_is_a_clear_error() {
        let taken = tcp(Some("127.0.0.1"), 0).bind().await.unwrap().unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = tcp(Some("127.0.0.1"), port).bind().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cannot listen on 127.0.0.1:{port}")
        );
    }
}
