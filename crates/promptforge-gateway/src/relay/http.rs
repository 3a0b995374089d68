//! The production [`Transport`]: a buffered request to a plain `http://` endpoint takes
//! the inline HTTP/1.1 client ([`super::h1`]); everything else, and an attempt the inline
//! client could not open a connection for (nothing was sent), takes reqwest
//! ([`super::pooled`]).

use futures::future::BoxFuture;

use super::transport::{Answer, AttemptFailure, Outgoing, Transport};
use super::{h1, pooled};
use crate::plan::{Endpoint, Plan};

/// The two HTTP clients behind one [`Transport`] (see the module documentation). Both keep
/// their connections per I/O thread, so the value itself holds nothing.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HttpTransport;

impl HttpTransport {
    /// Builds the calling thread's reqwest clients for the remote endpoints of `plan` now:
    /// boot and a profile switch check this way that they can be built, and an I/O thread
    /// does it before it serves, so no first request pays for loading the root
    /// certificates.
    pub(crate) fn warm(&self, plan: &Plan) -> Result<(), reqwest::Error> {
        pooled::warm(plan.endpoints().iter().map(|e| &**e))
    }

    async fn exchange(
        endpoint: &Endpoint,
        request: Outgoing<'_>,
    ) -> Result<Answer, AttemptFailure> {
        if !request.streaming
            && let Some(plain) = endpoint.plain()
        {
            match h1::exchange(endpoint, plain, request.path, request.body).await {
                h1::Exchange::Whole(bytes) => return Ok(Answer::Whole(bytes)),
                h1::Exchange::Failed(failed) => return Err(failed),
                h1::Exchange::Unconnected => {}
            }
        }
        pooled::send(endpoint, request.path, request.body, request.streaming).await
    }
}

impl Transport for HttpTransport {
    fn send<'a>(
        &'a self,
        endpoint: &'a Endpoint,
        request: Outgoing<'a>,
    ) -> BoxFuture<'a, Result<Answer, AttemptFailure>> {
        Box::pin(Self::exchange(endpoint, request))
    }
}
