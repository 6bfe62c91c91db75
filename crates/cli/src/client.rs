//! Connecting to a daemon, and the calls the commands make through it.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tonic::transport::{Channel, Endpoint, Uri};

use crate::daemon::Address;
use crate::proto::{self, cuzk_client::CuzkClient};

/// A connected client.
pub type Client = CuzkClient<Channel>;

/// The largest reply a client takes (a timeline of many spans).
const MAX_REPLY: usize = 1 << 30;

/// Connects to the daemon at `address`.
pub async fn connect(address: &Address) -> Result<Client> {
    Ok(CuzkClient::new(channel(address).await?).max_decoding_message_size(MAX_REPLY))
}

/// A gRPC channel to the daemon at `address`.
pub async fn channel(address: &Address) -> Result<Channel> {
    let channel = match address {
        Address::Unix(path) => {
            let path = path.clone();
            // The URI is not used: the connector dials the socket.
            Endpoint::from_static("http://cuzk.invalid")
                .connect_timeout(Duration::from_secs(5))
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
        }
        Address::Tcp(addr) => {
            Endpoint::from_shared(format!("http://{addr}"))?
                .connect_timeout(Duration::from_secs(5))
                .connect()
                .await
        }
    }
    .with_context(|| {
        format!("cannot reach the cuzk daemon at {address} (is `cuzk daemon` running?)")
    })?;
    Ok(channel)
}

/// The error of a call, as a user reads it.
pub fn call_error(what: &str, s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{what}: {} ({:?})", s.message(), s.code())
}

/// What a job's stream ends with.
#[derive(Debug)]
pub struct Finished {
    pub job_id: u64,
    pub proofs: Vec<Vec<u8>>,
    pub seconds: f64,
    /// A Filecoin proof as filecoin-proofs writes it (empty otherwise).
    pub proof: Vec<u8>,
    /// The daemon verified the Filecoin proof before replying.
    pub verified: bool,
    /// Where the job's time went.
    pub timing: Option<proto::JobTiming>,
}

/// Reads a job's stream to its end, passing each progress update to
/// `progress`.
pub async fn follow(
    mut stream: tonic::Streaming<proto::JobUpdate>,
    mut progress: impl FnMut(u64, &proto::Progress),
) -> Result<Finished> {
    loop {
        let update = stream
            .message()
            .await
            .map_err(|s| call_error("the job failed", s))?;
        let Some(update) = update else {
            bail!("the daemon closed the job's stream without an outcome");
        };
        match update.update {
            Some(proto::job_update::Update::Progress(p)) => progress(update.job_id, &p),
            Some(proto::job_update::Update::Proofs(p)) => {
                return Ok(Finished {
                    job_id: update.job_id,
                    proofs: p.proofs,
                    seconds: p.seconds,
                    proof: p.proof,
                    verified: p.verified,
                    timing: p.timing,
                });
            }
            None => {}
        }
    }
}
