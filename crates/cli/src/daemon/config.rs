//! The daemon's configuration: a TOML file whose `[engine]` table is the
//! engine's own configuration (`docs/engine.example.toml`) and whose other
//! keys say where the daemon listens and what requests may ask for
//! (`docs/daemon.example.toml`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use cuzk_engine::{ByteSize, EngineConfig};
use serde::{Deserialize, Serialize};

pub use super::allow::ClientNet;

mod checks;
pub use checks::MAX_CONFIG_BYTES;

/// Where a server listens or a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A Unix socket path.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

impl FromStr for Address {
    type Err = String;

    /// `unix:/path`, `/path` or `./path` (a Unix socket), `host:port` or
    /// `http://host:port` (TCP, an IP address).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let t = s.trim();
        if let Some(p) = t.strip_prefix("unix:") {
            return Ok(Address::Unix(PathBuf::from(p)));
        }
        let tcp = t.strip_prefix("http://").unwrap_or(t);
        if let Ok(a) = tcp.parse::<SocketAddr>() {
            return Ok(Address::Tcp(a));
        }
        if t.contains('/') || t.ends_with(".sock") {
            return Ok(Address::Unix(PathBuf::from(t)));
        }
        Err(format!(
            "`{s}` is neither a Unix socket path (unix:/run/cuzk.sock) nor an IP address and port \
             (127.0.0.1:7400)"
        ))
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Tcp(a) => write!(f, "{a}"),
        }
    }
}

impl Serialize for Address {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The socket a client and a daemon use when none is given: `CUZK_DAEMON`,
/// else `$XDG_RUNTIME_DIR/cuzk.sock`, else `/tmp/cuzk-<uid>/cuzk.sock`.
pub fn default_address() -> Address {
    if let Some(a) = std::env::var("CUZK_DAEMON")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return a;
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Address::Unix(PathBuf::from(dir).join("cuzk.sock"));
    }
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    Address::Unix(PathBuf::from(format!("/tmp/cuzk-{uid}/cuzk.sock")))
}

/// The longest duration a setting may hold: one year, in seconds.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// The daemon's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Where the gRPC service listens: a Unix socket (the default, see
    /// [`default_address`]) or a TCP address.
    pub listen: Address,
    /// Permission bits of the Unix socket (0o600: its owner only; 0o660:
    /// its group too). Bits outside 0o777 (setuid, setgid, sticky) are
    /// refused; so is writable by others (0o002) unless `allow_world_socket`.
    pub socket_mode: u32,
    /// Let `socket_mode` make the socket writable by every local user (who
    /// can then prove, cancel anyone's job and shut the daemon down).
    pub allow_world_socket: bool,
    /// Where `/metrics` is served (Prometheus text format); "" turns it off.
    pub metrics_listen: String,
    /// Allow `listen` / `metrics_listen` on addresses other than loopback.
    /// The API has no authentication: only for a network you trust.
    pub allow_remote: bool,
    /// The networks TCP clients (of `listen` and `metrics_listen`) must
    /// connect from, in CIDR notation (`10.0.0.0/8`, `fd00::/8`) or single
    /// addresses; a connection from elsewhere is closed as it is accepted.
    /// Empty: anyone who can reach the port (loopback only unless
    /// `allow_remote`).
    pub allowed_clients: Vec<ClientNet>,
    /// Directories whose parameter files requests may name by path.
    pub params_dirs: Vec<PathBuf>,
    /// Parameter sets by name (`name = "/path/to/file.params"`): requests
    /// name these, and they may lie outside `params_dirs`.
    pub param_sets: BTreeMap<String, PathBuf>,
    /// Parameter sets to load at startup (names or paths).
    pub preload: Vec<String>,
    /// The Filecoin parameter cache: filecoin-proofs' `v28-*.params` and
    /// `.vk` files, which Filecoin requests are proved and verified with;
    /// unset: `FIL_PROOFS_PARAMETER_CACHE`, else
    /// `/var/tmp/filecoin-proof-parameters`, as filecoin-proofs reads it.
    pub filecoin_params_dir: Option<PathBuf>,
    /// Verify every Filecoin proof before returning it (a proof that fails
    /// is an error naming the job, never a reply).
    pub verify_proofs: bool,
    /// Check each Filecoin parameter and verifying-key file the first time
    /// a request uses it, as `cuzk params check` does: against the digest
    /// filecoin-proofs publishes for its name (hashing a 32 GiB set takes
    /// about a minute), or, for a file it does not list, for its structure.
    /// A request whose file fails is refused (FAILED_PRECONDITION, naming
    /// the file and what is wrong); a file that passed is not checked again
    /// while its size and modification time stay the same.
    pub check_params: bool,
    /// The largest request message (a 32 GiB PoRep C1 output is about
    /// 50 MB of JSON).
    pub max_request_bytes: ByteSize,
    /// The request bytes being received and parsed at once, at least
    /// `max_request_bytes`: parsing a request takes about four times its
    /// size, so this bounds that memory; a request that finds it spent
    /// waits for the earlier ones.
    pub max_parsing_bytes: ByteSize,
    /// The most partitions in one request.
    pub max_partitions: usize,
    /// The most constraints of a requested circuit (checked before
    /// anything is recorded).
    pub max_constraints: u64,
    /// Jobs submitted and not yet finished, at most; more are refused.
    pub max_jobs: usize,
    /// How long a finished job's proofs wait for an `Await`, in seconds.
    pub result_ttl_s: f64,
    /// On shutdown, how long running jobs may take to finish before they are
    /// cancelled, in seconds.
    pub shutdown_grace_s: f64,
    /// The engine's configuration.
    pub engine: EngineConfig,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: default_address(),
            socket_mode: 0o600,
            allow_world_socket: false,
            metrics_listen: "127.0.0.1:9477".into(),
            allow_remote: false,
            allowed_clients: Vec::new(),
            params_dirs: Vec::new(),
            param_sets: BTreeMap::new(),
            preload: Vec::new(),
            filecoin_params_dir: None,
            verify_proofs: true,
            check_params: false,
            max_request_bytes: ByteSize(128 << 20),
            max_parsing_bytes: ByteSize(512 << 20),
            max_partitions: 1024,
            max_constraints: 1 << 28,
            max_jobs: 4096,
            result_ttl_s: 600.0,
            shutdown_grace_s: 60.0,
            engine: EngineConfig::default(),
        }
    }
}

impl DaemonConfig {
    /// Reads a TOML file: a regular file of at most [`MAX_CONFIG_BYTES`]
    /// (a device, FIFO or directory is refused before it is read).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = checks::read_config_text(path)?;
        Self::from_toml_str(&text).with_context(|| format!("daemon config {}", path.display()))
    }

    /// Parses a TOML document.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        Ok(toml::from_str(text)?)
    }

    /// Where Filecoin requests' parameter files are read from.
    pub fn filecoin_params_dir(&self) -> PathBuf {
        self.filecoin_params_dir
            .clone()
            .unwrap_or_else(cuzk_filecoin::params::default_dir)
    }

    /// The metrics address, `None` when turned off.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>> {
        let m = self.metrics_listen.trim();
        if m.is_empty() || m == "off" {
            return Ok(None);
        }
        let a: SocketAddr = m.parse().with_context(|| {
            format!("metrics_listen `{m}` is not an IP address and port (127.0.0.1:9477)")
        })?;
        Ok(Some(a))
    }

    /// Refuses settings that would expose the daemon without saying so.
    pub fn check(&self) -> Result<()> {
        if let Address::Tcp(a) = &self.listen
            && !a.ip().is_loopback()
            && !self.allow_remote
        {
            bail!(
                "listen = \"{a}\" is not a loopback address: the API has no authentication; set \
                 allow_remote = true to listen there anyway"
            );
        }
        if let Some(a) = self.metrics_addr()?
            && !a.ip().is_loopback()
            && !self.allow_remote
        {
            bail!(
                "metrics_listen = \"{a}\" is not a loopback address; set allow_remote = true to \
                 serve metrics there anyway"
            );
        }
        checks::socket_mode(self.socket_mode, self.allow_world_socket)?;
        checks::limits(self)?;
        if self.max_parsing_bytes.0 < self.max_request_bytes.0 {
            bail!(
                "max_parsing_bytes = {} is below max_request_bytes = {}: the largest request \
                 could never be parsed; raise max_parsing_bytes (about 4 x its value is what \
                 parsing such requests takes) or lower max_request_bytes",
                self.max_parsing_bytes,
                self.max_request_bytes
            );
        }
        for (name, secs) in [
            ("result_ttl_s", self.result_ttl_s),
            ("shutdown_grace_s", self.shutdown_grace_s),
        ] {
            // Checked here, where the file is read: a duration out of range
            // would otherwise panic in Duration::from_secs_f64 much later.
            if !(secs.is_finite() && (0.0..=MAX_SECONDS).contains(&secs)) {
                bail!(
                    "{name} = {secs}: a duration is a number of seconds from 0 to {MAX_SECONDS} \
                     (one year)"
                );
            }
        }
        checks::directories(self)?;
        Ok(())
    }

    /// Listeners open to any host that can reach them (a non-loopback
    /// address with `allow_remote` and no `allowed_clients`): one warning
    /// line for each, for the operator's log.
    pub fn exposure_warnings(&self) -> Vec<String> {
        if !self.allowed_clients.is_empty() {
            return Vec::new();
        }
        let metrics = self.metrics_addr().ok().flatten();
        let listen = match &self.listen {
            Address::Tcp(a) => Some(*a),
            Address::Unix(_) => None,
        };
        [("listen", listen), ("metrics_listen", metrics)]
            .into_iter()
            .filter_map(|(name, a)| {
                let a = a.filter(|a| !a.ip().is_loopback())?;
                Some(format!(
                    "{name} = \"{a}\" with allow_remote = true and no allowed_clients: any host \
                     that can reach this port can use an API without authentication; list the \
                     clients' networks in allowed_clients (e.g. [\"10.0.0.0/8\"]) and firewall \
                     the port"
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_parses_and_addresses_read_both_ways() {
        let text = include_str!("../../../../docs/daemon.example.toml");
        let c = DaemonConfig::from_toml_str(text).unwrap();
        c.check().unwrap();
        assert_eq!(
            "unix:/run/x.sock".parse(),
            Ok(Address::Unix("/run/x.sock".into()))
        );
        assert_eq!(
            "127.0.0.1:7400".parse(),
            Ok(Address::Tcp("127.0.0.1:7400".parse().unwrap()))
        );
        assert_eq!(
            "http://[::1]:7400".parse(),
            Ok(Address::Tcp("[::1]:7400".parse().unwrap()))
        );
        assert!("nonsense".parse::<Address>().is_err());
        let remote = DaemonConfig {
            listen: "0.0.0.0:7400".parse().unwrap(),
            ..DaemonConfig::default()
        };
        assert!(
            remote
                .check()
                .unwrap_err()
                .to_string()
                .contains("allow_remote")
        );
        let err = DaemonConfig::from_toml_str("lisen = \"x\"").unwrap_err();
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
        // Durations that would panic later are refused when read.
        for bad in ["inf", "nan", "-1.0", "1e300"] {
            let c = DaemonConfig::from_toml_str(&format!("result_ttl_s = {bad}")).unwrap();
            let err = c.check().unwrap_err().to_string();
            assert!(err.contains("result_ttl_s"), "{bad}: {err}");
        }
        let c = DaemonConfig::from_toml_str("shutdown_grace_s = 0.5").unwrap();
        c.check().unwrap();
    }
}
