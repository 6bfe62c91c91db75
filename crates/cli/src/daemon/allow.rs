//! Who may connect over TCP: `allowed_clients`, a list of networks. A
//! connection from an address outside them is closed as it is accepted,
//! before a byte of HTTP/2 or gRPC is read from it. The API itself has no
//! authentication (Curio's client can send neither TLS nor tokens), so this
//! list and the network around the daemon are what keep strangers out.

use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use tokio_stream::{Stream, StreamExt};

use super::metrics::Metrics;

/// One entry of `allowed_clients`: a network in CIDR notation
/// (`10.0.0.0/8`, `fd00::/8`) or a single address (`192.0.2.7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientNet(IpNet);

impl ClientNet {
    /// Whether `ip` is in this network (an IPv4 peer seen on an IPv6
    /// socket as `::ffff:a.b.c.d` counts as `a.b.c.d`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
}

impl FromStr for ClientNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Ok(net) = t.parse::<IpNet>() {
            return Ok(ClientNet(net));
        }
        if let Ok(ip) = t.parse::<IpAddr>() {
            return Ok(ClientNet(IpNet::from(ip)));
        }
        let shown: String = t.chars().take(100).collect();
        Err(format!(
            "allowed_clients: `{shown}` is neither a network in CIDR notation (10.0.0.0/8, \
             fd00::/8) nor an IP address"
        ))
    }
}

impl std::fmt::Display for ClientNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for ClientNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClientNet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The TCP peers let in, and the record of those turned away.
#[derive(Debug, Clone)]
pub struct Gate {
    nets: Arc<[ClientNet]>,
    metrics: Arc<Metrics>,
    log: Arc<RefusalLog>,
}

impl Gate {
    /// Lets in peers in `nets`, or everyone when `nets` is empty (then the
    /// listen address and `allow_remote` decide who can reach the port).
    pub fn new(nets: &[ClientNet], metrics: Arc<Metrics>) -> Self {
        Gate {
            nets: nets.into(),
            metrics,
            log: Arc::default(),
        }
    }

    /// Whether a connection from `ip` may go on; a refusal is counted in
    /// `cuzk_connections_refused_total{listener}` and logged.
    pub fn admit(&self, ip: IpAddr, listener: &'static str) -> bool {
        if self.nets.is_empty() || self.nets.iter().any(|n| n.contains(ip)) {
            return true;
        }
        self.metrics.refuse_connection(listener);
        self.log.refused(ip, listener);
        false
    }

    /// `incoming` without the connections of peers outside the list: those
    /// are dropped (closed) as they are accepted.
    pub fn filter<S>(
        self,
        incoming: S,
        listener: &'static str,
    ) -> impl Stream<Item = std::io::Result<tokio::net::TcpStream>>
    where
        S: Stream<Item = std::io::Result<tokio::net::TcpStream>>,
    {
        incoming.filter(move |accepted| match accepted {
            // A peer already gone has no address: nothing to serve.
            Ok(stream) => stream
                .peer_addr()
                .is_ok_and(|peer| self.admit(peer.ip(), listener)),
            Err(_) => true,
        })
    }
}

/// Refusals are logged at most once a second (with the count of those left
/// unlogged), so a client that keeps knocking cannot flood the log.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Mutex<Option<Instant>>,
    unlogged: AtomicU64,
}

impl RefusalLog {
    fn refused(&self, ip: IpAddr, listener: &str) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(now);
        let also = self.unlogged.swap(0, Ordering::Relaxed);
        tracing::warn!(
            peer = %ip,
            listener,
            also_refused_since_last_line = also,
            "connection refused: the peer is not in allowed_clients"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_and_addresses_parse_and_match() {
        let nets: Vec<ClientNet> = ["10.0.0.0/8", " 192.0.2.7 ", "fd00::/8", "::1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let gate = Gate::new(&nets, Metrics::new().unwrap());
        for ok in ["10.1.2.3", "192.0.2.7", "fd12::1", "::1", "::ffff:10.9.9.9"] {
            assert!(gate.admit(ok.parse().unwrap(), "grpc"), "{ok}");
        }
        for refused in ["11.0.0.1", "192.0.2.8", "127.0.0.1", "fe80::1"] {
            assert!(!gate.admit(refused.parse().unwrap(), "grpc"), "{refused}");
        }
        let open = Gate::new(&[], Metrics::new().unwrap());
        assert!(open.admit("203.0.113.9".parse().unwrap(), "grpc"));
        for bad in ["10.0.0.0/33", "example.org", "10.0.0", ""] {
            let err = bad.parse::<ClientNet>().unwrap_err();
            assert!(err.contains("CIDR"), "{bad}: {err}");
        }
        assert_eq!(nets[0].to_string(), "10.0.0.0/8");
        assert_eq!(nets[1].to_string(), "192.0.2.7/32");
    }
}
